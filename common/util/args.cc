// Implementation of the shared command-line parser.
#include "common/util/args.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/error.h"

namespace pshard {

ArgParser::ArgParser(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void ArgParser::add_option(const std::string& name, const std::string& metavar, const std::string& help, bool required,
                           const std::string& default_value) {
  order_.push_back(name);
  specs_[name] = Spec{metavar, help, default_value, required, false, false};
}

void ArgParser::add_multi(const std::string& name, const std::string& metavar, const std::string& help) {
  order_.push_back(name);
  specs_[name] = Spec{metavar, help, "", false, false, true};
}

void ArgParser::add_flag(const std::string& name, const std::string& help) {
  order_.push_back(name);
  specs_[name] = Spec{"", help, "", false, true, false};
}

void ArgParser::allow_command(const std::string& help) { command_help_ = help; }

void ArgParser::allow_positionals(const std::string& metavar, const std::string& help) {
  positional_metavar_ = metavar;
  positional_help_ = help;
}

std::string ArgParser::help() const {
  std::ostringstream out;
  out << "usage: " << program_ << " [options]" << (positional_metavar_.empty() ? "" : " " + positional_metavar_)
      << (command_help_.empty() ? "" : " [-- CMD ARGS...]") << "\n\n"
      << summary_ << "\n\noptions:\n";
  for (const std::string& name : order_) {
    const Spec& s = specs_.at(name);
    std::string left = "--" + name + (s.metavar.empty() ? "" : " " + s.metavar);
    out << "  " << left;
    for (size_t i = left.size(); i < 28; ++i) out << ' ';
    out << " " << s.help;
    if (s.required) out << " (required)";
    if (!s.default_value.empty()) out << " (default " << s.default_value << ")";
    if (s.multi) out << " (repeatable)";
    out << "\n";
  }
  out << "  --help                       show this help\n";
  if (!positional_metavar_.empty()) out << "\n" << positional_metavar_ << ": " << positional_help_ << "\n";
  if (!command_help_.empty()) out << "\n-- CMD ARGS...: " << command_help_ << "\n";
  return out.str();
}

bool ArgParser::parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
    if (a == "--" && !command_help_.empty()) {
      command_.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      if (command_.empty()) throw Error(program_ + ": '--' must be followed by a command to run");
      break;
    }
    if (a.rfind("--", 0) != 0 || a.size() == 2) {
      if (positional_metavar_.empty()) throw Error(program_ + ": unexpected argument '" + a + "'");
      positionals_.push_back(a);
      continue;
    }
    std::string name = a.substr(2);
    std::string value;
    bool inline_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    auto it = specs_.find(name);
    if (it == specs_.end()) throw Error(program_ + ": unknown option --" + name + " (see --help)");
    if (it->second.is_flag) {
      if (inline_value) throw Error(program_ + ": option --" + name + " takes no value");
      values_[name] = {"true"};
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) throw Error(program_ + ": option --" + name + " needs a value " + it->second.metavar);
      value = args[++i];
    }
    if (it->second.multi) {
      values_[name].push_back(value);
    } else {
      values_[name] = {value};
    }
  }
  for (const auto& [name, spec] : specs_) {
    if (spec.required && !values_.count(name)) throw Error(program_ + ": option --" + name + " is required");
  }
  return true;
}

bool ArgParser::has(const std::string& name) const {
  return values_.count(name) > 0 || (specs_.count(name) && !specs_.at(name).default_value.empty());
}

std::string ArgParser::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it != values_.end()) return it->second.back();
  auto spec = specs_.find(name);
  if (spec == specs_.end()) throw Error("internal: option --" + name + " was not declared");
  return spec->second.default_value;
}

int64_t ArgParser::get_int(const std::string& name) const {
  std::string text = get(name);
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0') {
    throw Error(program_ + ": option --" + name + " expects an integer, got '" + text + "'");
  }
  return v;
}

double ArgParser::get_double(const std::string& name) const {
  std::string text = get(name);
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || errno != 0 || *end != '\0') {
    throw Error(program_ + ": option --" + name + " expects a number, got '" + text + "'");
  }
  return v;
}

bool ArgParser::flag(const std::string& name) const { return values_.count(name) > 0; }

const std::vector<std::string>& ArgParser::get_all(const std::string& name) const {
  static const std::vector<std::string> kEmpty;
  auto it = values_.find(name);
  return it == values_.end() ? kEmpty : it->second;
}

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || errno != 0 || *end != '\0') {
      throw Error(what + ": expected a comma-separated list of integers, got '" + text + "'");
    }
    out.push_back(v);
  }
  if (out.empty()) throw Error(what + ": empty list");
  return out;
}

}  // namespace pshard
