// The schema of every configuration key: type, default, range and meaning.
#pragma once

#include <string>
#include <vector>

namespace pshard {

enum class ConfigType { kString, kInt, kDouble, kBool, kIntList };

struct ConfigKey {
  const char* key;  // "section.name"
  ConfigType type;
  const char* default_value;  // canonical text: "0.01", "true", "[256, 128]", "sgd"
  double min;                 // inclusive range for numbers (ignored otherwise)
  double max;
  const char* choices;  // for strings: "a|b|c", or "" for free text
  const char* doc;      // one line: meaning and unit
};

// All keys, in documentation order.
const std::vector<ConfigKey>& config_schema();
// The entry for `key`, or nullptr.
const ConfigKey* find_config_key(const std::string& key);

}  // namespace pshard
