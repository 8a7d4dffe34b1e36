// A small command-line parser shared by every `pshard` subcommand.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace pshard {

// Declares options, parses argv, prints --help. Unknown options, missing
// values and malformed numbers are Errors naming the option.
//
//   ArgParser p("pshard train", "train a model in one process");
//   p.add_option("config", "FILE", "experiment config (TOML)", /*required=*/true);
//   p.add_multi("set", "KEY=VALUE", "override a config key (repeatable)");
//   p.add_flag("json", "print one JSON object");
//   if (!p.parse(args)) return 0;   // --help was printed
//   std::string path = p.get("config");
class ArgParser {
 public:
  ArgParser(std::string program, std::string summary);

  void add_option(const std::string& name, const std::string& metavar, const std::string& help, bool required = false,
                  const std::string& default_value = "");
  void add_multi(const std::string& name, const std::string& metavar, const std::string& help);
  void add_flag(const std::string& name, const std::string& help);
  // Positional arguments after the options (e.g. RUN_DIR...).
  void allow_positionals(const std::string& metavar, const std::string& help);
  // A program to run after "--" (`pshard launch ... -- python3 train.py ARGS`): everything after the first "--"
  // is command(), not parsed.
  void allow_command(const std::string& help);

  // Returns false when --help was given (and printed to stdout).
  bool parse(const std::vector<std::string>& args);

  bool has(const std::string& name) const;  // given on the command line (or has a default)
  std::string get(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  bool flag(const std::string& name) const;
  const std::vector<std::string>& get_all(const std::string& name) const;
  const std::vector<std::string>& positionals() const { return positionals_; }
  const std::vector<std::string>& command() const { return command_; }
  std::string help() const;

 private:
  struct Spec {
    std::string metavar, help, default_value;
    bool required = false, is_flag = false, multi = false;
  };
  std::string program_, summary_, positional_metavar_, positional_help_, command_help_;
  std::vector<std::string> order_;
  std::map<std::string, Spec> specs_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positionals_;
  std::vector<std::string> command_;
};

// Splits "1,2,4" into {1, 2, 4}; an Error names `what` on a bad item.
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what);

}  // namespace pshard
