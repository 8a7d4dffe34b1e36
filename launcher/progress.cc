// Following metrics.jsonl and formatting the progress line.
#include "launcher/progress.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>

#include "common/error.h"

namespace pshard {

std::vector<Json> MetricsFollower::poll() {
  std::vector<Json> out;
  std::ifstream in(path_, std::ios::binary);
  if (!in) return out;
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  if (size < offset_) {  // rewritten from the start
    offset_ = 0;
    partial_.clear();
  }
  if (size == offset_) return out;
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string chunk(size - offset_, '\0');
  in.read(&chunk[0], static_cast<std::streamsize>(chunk.size()));
  offset_ += static_cast<uint64_t>(in.gcount());
  chunk.resize(static_cast<size_t>(in.gcount()));
  partial_ += chunk;
  size_t start = 0;
  for (size_t nl = partial_.find('\n'); nl != std::string::npos; nl = partial_.find('\n', start)) {
    std::string line = partial_.substr(start, nl - start);
    start = nl + 1;
    if (line.empty()) continue;
    try {
      out.push_back(Json::parse(line, path_));
    } catch (const Error&) {
      // not one of ours; ignore
    }
  }
  partial_.erase(0, start);
  return out;
}

namespace {
double num(const Json& j, const char* key, double fallback = 0) {
  return j.has(key) && j.at(key).is_numeric() ? j.at(key).as_number() : fallback;
}
}  // namespace

void ProgressState::add(const Json& e) {
  if (!e.has("event") || !e.at("event").is_string()) return;
  const std::string& kind = e.at("event").as_string();
  if (kind == "failure") {
    const auto text = [&e](const char* key) {
      return e.has(key) && e.at(key).is_string() ? e.at(key).as_string() : std::string();
    };
    if (server_failure_.empty() && text("role") == "server") {
      server_failure_ = "server " + std::to_string(static_cast<int64_t>(num(e, "rank"))) + " (host " + text("host") +
                        ", pid " + std::to_string(static_cast<int64_t>(num(e, "pid"))) + ") is " + text("verdict") +
                        ": " + text("why");
    }
    return;
  }
  if (kind == "start") {
    server_failure_.clear();  // a new try of the job
    epochs_ = static_cast<int64_t>(num(e, "epochs"));
    steps_per_epoch_ = static_cast<int64_t>(num(e, "steps_per_epoch"));
    global_batch_ = static_cast<int64_t>(num(e, "global_batch"));
  } else if (kind == "step") {
    if (num(e, "rank") != 0) return;  // every worker logs its steps; the line follows worker 0's
    epoch_ = static_cast<int64_t>(num(e, "epoch"));
    step_ = static_cast<int64_t>(num(e, "step"));
    loss_ = num(e, "loss");
    wall_s_ = num(e, "wall_s");
  } else if (kind == "epoch") {
    epoch_ = static_cast<int64_t>(num(e, "epoch"));
    step_ = static_cast<int64_t>(num(e, "step")) - 1;
    wall_s_ = num(e, "wall_s", wall_s_);
    if (e.has("train_loss") && e.at("train_loss").is_numeric()) loss_ = e.at("train_loss").as_number();
  } else if (kind == "members") {
    const int64_t first = static_cast<int64_t>(num(e, "first_step"));
    samples_before_plan_ += (first - plan_step_) * global_batch_;
    plan_step_ = first;
    global_batch_ = static_cast<int64_t>(num(e, "global_batch", static_cast<double>(global_batch_)));
    const int64_t steps = static_cast<int64_t>(num(e, "steps"));  // a program's plans do not know their steps
    if (steps > 0) planned_total_ = first + steps * (epochs_ - static_cast<int64_t>(num(e, "epoch")) + 1);
  } else if (kind == "summary") {
    summary_ = e;
  } else if (kind == "stall") {
    stall_ = stall_note(e);
    stall_at_step_ = step_;
  }
  if (!stall_.empty() && step_ > stall_at_step_) stall_.clear();  // the job moved on since
}

// "waiting 10.0 s for worker 3 (last heard 0.4 s ago)" from a server's stall event as the coordinator wrote it.
std::string ProgressState::stall_note(const Json& e) {
  if (!e.has("missing") || !e.at("missing").is_array()) return "";
  const std::vector<Json>& missing = e.at("missing").elements();
  const std::vector<Json> none;
  const std::vector<Json>& heard =
      e.has("last_heard_s") && e.at("last_heard_s").is_array() ? e.at("last_heard_s").elements() : none;
  char buf[96];
  std::snprintf(buf, sizeof buf, "waiting %.1f s for %s", num(e, "waited_s"),
                missing.size() == 1 ? "worker " : "workers ");
  std::string note = buf;
  for (size_t i = 0; i < missing.size(); ++i) {
    if (!missing[i].is_number()) continue;
    note += (i ? ", " : "") + std::to_string(missing[i].as_int());
    if (i < heard.size() && heard[i].is_number()) {
      std::snprintf(buf, sizeof buf, " (last heard %.1f s ago)", heard[i].as_number());
      note += buf;
    }
  }
  if (e.has("initial_weights") && e.at("initial_weights").type() == Json::Type::kBool &&
      e.at("initial_weights").as_bool()) {
    note += "'s initial weights";
  }
  return note;
}

std::optional<std::string> ProgressState::line() const {
  if (step_ < 0 && !stall_.empty()) return stall_;
  if (step_ < 0) return std::nullopt;
  const int64_t total = planned_total_ > 0 ? planned_total_ : epochs_ * steps_per_epoch_;
  const int64_t done = step_ + 1;
  const int64_t samples = samples_before_plan_ + (done - plan_step_) * global_batch_;
  const double rate = wall_s_ > 0 ? static_cast<double>(samples) / wall_s_ : 0.0;
  std::string eta = "-";
  if (total > 0 && done > 0 && wall_s_ > 0) {
    const int64_t left = static_cast<int64_t>(wall_s_ / static_cast<double>(done) * static_cast<double>(total - done));
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(left / 60), static_cast<long long>(left % 60));
    eta = buf;
  }
  // A program that declared no length (no train.epochs) has no "of N": "epoch 3  step 120".
  const auto of = [](int64_t n) { return n > 0 ? "/" + std::to_string(n) : std::string(); };
  char buf[256];
  std::snprintf(buf, sizeof buf, "epoch %lld%s  step %lld%s  loss %.4f  %.0f samples/s  ETA %s",
                static_cast<long long>(epoch_), of(epochs_).c_str(), static_cast<long long>(done), of(total).c_str(),
                loss_, rate, eta.c_str());
  if (!stall_.empty()) return std::string(buf) + "  " + stall_;
  return std::string(buf);
}

namespace {
void write_text(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}
constexpr const char* kClearLine = "\r\033[K";
}  // namespace

TerminalStatus::TerminalStatus(int status_fd, bool is_tty, double plain_every_s)
    : fd_(status_fd), tty_(is_tty), plain_every_s_(plain_every_s) {}

void TerminalStatus::print(int fd, const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  if (tty_ && !status_.empty()) write_text(fd_, kClearLine);
  write_text(fd, text);
  if (tty_ && !status_.empty()) write_text(fd_, status_);
}

void TerminalStatus::set(const std::string& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (status == status_) return;
  status_ = status;
  if (tty_) {
    write_text(fd_, kClearLine + status_);
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!last_plain_ || std::chrono::duration<double>(now - *last_plain_).count() >= plain_every_s_) {
    write_text(fd_, status_ + "\n");
    last_plain_ = now;
  }
}

void TerminalStatus::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  if (tty_ && !status_.empty()) write_text(fd_, kClearLine);
  status_.clear();
}

}  // namespace pshard
