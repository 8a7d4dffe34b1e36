// SLURM host-list and tasks-per-node expansion (see hostlist.h).
#include "launcher/scheduler/hostlist.h"

#include <cctype>
#include <cstdint>

#include "common/error.h"

namespace pshard::scheduler {
namespace {

constexpr size_t kMaxHosts = 1000000;

bool is_separator(char c) { return c == ',' || std::isspace(static_cast<unsigned char>(c)); }

[[noreturn]] void fail(const std::string& list, size_t offset, const std::string& what) {
  throw Error("host list '" + list + "': " + what + " at offset " + std::to_string(offset));
}

// Digits at [pos, end) as a number; `pos` is where the caller found them.
uint64_t parse_digits(const std::string& list, size_t pos, const std::string& digits) {
  if (digits.empty()) fail(list, pos, "expected a number");
  if (digits.size() > 18) fail(list, pos, "number '" + digits + "' is too long");
  uint64_t v = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) fail(list, pos, "'" + digits + "' is not a number");
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

std::string padded(uint64_t v, size_t width) {
  std::string s = std::to_string(v);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

// The numbers of one bracket body "1-3,5,08-10" (starting at `offset` in the list), as strings.
std::vector<std::string> expand_bracket(const std::string& list, size_t offset, const std::string& body) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    if (comma == std::string::npos) comma = body.size();
    const std::string item = body.substr(start, comma - start);
    const size_t at = offset + start;
    if (item.empty()) fail(list, at, "empty item in brackets");
    const size_t dash = item.find('-');
    if (dash == std::string::npos) {
      parse_digits(list, at, item);
      out.push_back(item);
    } else {
      const std::string lo_s = item.substr(0, dash), hi_s = item.substr(dash + 1);
      const uint64_t lo = parse_digits(list, at, lo_s), hi = parse_digits(list, at + dash + 1, hi_s);
      if (hi < lo) fail(list, at, "range " + item + " goes backwards");
      if (hi - lo >= kMaxHosts) fail(list, at, "range " + item + " is too large");
      for (uint64_t v = lo; v <= hi; ++v) out.push_back(padded(v, lo_s.size()));
    }
    if (out.size() > kMaxHosts) fail(list, at, "more than 1000000 hosts");
    start = comma + 1;
  }
  return out;
}

// One entry ("r[1-2]n[1-3]x") starting at `offset`: the cartesian product of its bracket groups.
void expand_entry(const std::string& list, size_t offset, const std::string& entry, std::vector<std::string>& out) {
  std::vector<std::string> partial = {""};
  size_t i = 0;
  while (i < entry.size()) {
    const size_t open = entry.find('[', i);
    const size_t close_before = entry.find(']', i);
    if (close_before != std::string::npos && (open == std::string::npos || close_before < open)) {
      fail(list, offset + close_before, "']' without '['");
    }
    const std::string text = entry.substr(i, open == std::string::npos ? std::string::npos : open - i);
    for (std::string& p : partial) p += text;
    if (open == std::string::npos) break;
    const size_t close = entry.find(']', open);
    if (close == std::string::npos) fail(list, offset + open, "'[' without ']'");
    const size_t nested = entry.find('[', open + 1);
    if (nested != std::string::npos && nested < close) fail(list, offset + nested, "nested '['");
    const std::vector<std::string> numbers =
        expand_bracket(list, offset + open + 1, entry.substr(open + 1, close - open - 1));
    if (partial.size() * numbers.size() + out.size() > kMaxHosts) fail(list, offset + open, "more than 1000000 hosts");
    std::vector<std::string> next;
    next.reserve(partial.size() * numbers.size());
    for (const std::string& p : partial) {
      for (const std::string& n : numbers) next.push_back(p + n);
    }
    partial = std::move(next);
    i = close + 1;
  }
  out.insert(out.end(), partial.begin(), partial.end());
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& list) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < list.size()) {
    if (is_separator(list[i])) {
      ++i;
      continue;
    }
    // An entry runs to the next separator outside brackets.
    size_t end = i;
    int depth = 0;
    while (end < list.size() && (depth > 0 || !is_separator(list[end]))) {
      if (list[end] == '[') ++depth;
      if (list[end] == ']') --depth;
      if (depth < 0) fail(list, end, "']' without '['");
      ++end;
    }
    if (depth > 0) fail(list, list.find('[', i), "'[' without ']'");
    expand_entry(list, i, list.substr(i, end - i), out);
    i = end;
  }
  if (out.empty()) throw Error("host list '" + list + "' names no hosts");
  return out;
}

std::vector<int> expand_tasks_per_node(const std::string& list) {
  std::vector<int> out;
  size_t start = 0;
  auto bad = [&](size_t at, const std::string& what) -> void {
    throw Error("tasks per node '" + list + "': " + what + " at offset " + std::to_string(at));
  };
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(start, comma - start);
    if (item.empty()) bad(start, "empty item");
    uint64_t count = 0, repeat = 1;
    const size_t paren = item.find('(');
    if (paren == std::string::npos) {
      count = parse_digits(list, start, item);
    } else {
      if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 || item.back() != ')') {
        bad(start + paren, "expected COUNT(xREPEAT)");
      }
      count = parse_digits(list, start, item.substr(0, paren));
      repeat = parse_digits(list, start + paren + 2, item.substr(paren + 2, item.size() - paren - 3));
    }
    if (count < 1 || count > 100000) bad(start, "task count must be in 1..100000");
    if (repeat < 1 || out.size() + repeat > kMaxHosts) bad(start, "bad repeat count");
    out.insert(out.end(), static_cast<size_t>(repeat), static_cast<int>(count));
    start = comma + 1;
  }
  return out;
}

}  // namespace pshard::scheduler
