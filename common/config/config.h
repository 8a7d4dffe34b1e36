// Experiment configuration: a TOML file plus `--set key=value` overrides,
// validated against one schema (common/config/schema.cc).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace pshard {

// A validated configuration. Every key lives in the schema with its type,
// default and range; a key that is not in the schema, a value of the wrong
// type or out of range is an Error naming the key and the file.
//
//   Config cfg = Config::from_file("configs/fmnist_mlp.toml", {"optimizer.lr=0.05"});
//   double lr = cfg.get_double("optimizer.lr");
class Config {
 public:
  // Loads `path` (TOML) and applies overrides of the form "section.key=value".
  static Config from_file(const std::string& path, const std::vector<std::string>& overrides = {});
  // Same, from TOML text; `origin` names the source in error messages.
  static Config from_string(const std::string& toml_text, const std::string& origin,
                            const std::vector<std::string>& overrides = {});
  // Schema defaults only.
  static Config defaults();

  std::string get_string(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_double(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::vector<int64_t> get_int_list(const std::string& key) const;

  // True when the file or an override set the key (false: schema default).
  bool is_set(const std::string& key) const;

  // Applies one "section.key=value" override (validated like the file).
  void set(const std::string& assignment);
  // Where the values came from, for messages ("configs/x.toml").
  const std::string& origin() const { return origin_; }
  // All keys with their values, as TOML (written into every run directory).
  std::string to_toml() const;

 private:
  std::string origin_;
  std::map<std::string, std::string> values_;  // key -> canonical text
  std::map<std::string, bool> explicit_;       // keys set by file/override
};

}  // namespace pshard
