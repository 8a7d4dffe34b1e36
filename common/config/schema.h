// The schema of every configuration key: type, default, range and meaning.
#pragma once

#include <string>
#include <vector>

namespace pshard {

enum class ConfigType { kString, kInt, kDouble, kBool, kIntList };

// Whether a resumed run (pshard launch --resume, a restarted server or worker) may give a key another value than the
// run had: how the run runs (logging, checkpoints, threads, timeouts, failure policies) may change; what the
// checkpoints and the schedule were computed for (model, data, optimizer, schedule, batch, epochs, seed, mode) may not.
enum class OnResume { kFixed, kMayChange };

struct ConfigKey {
  const char* key;  // "section.name"
  ConfigType type;
  const char* default_value;  // canonical text: "0.01", "true", "[256, 128]", "sgd"
  double min;                 // inclusive range for numbers (ignored otherwise)
  double max;
  const char* choices;  // for strings: "a|b|c", or "" for free text
  const char* doc;      // one line: meaning and unit
  OnResume on_resume = OnResume::kFixed;
  bool max_open = false;  // the range is [min, max) (e.g. a decay that must stay below 1)
};

// Whether `v` lies in `k`'s range ([min, max], or [min, max) when max_open); NaN never does.
bool in_range(const ConfigKey& k, double v);
// `k`'s range as text: "[0, 1]", "[0, 1)", "[0, inf]".
std::string range_text(const ConfigKey& k);

// All keys, in documentation order.
const std::vector<ConfigKey>& config_schema();
// The entry for `key`, or nullptr.
const ConfigKey* find_config_key(const std::string& key);

// Installs the allowed values of a string key whose list belongs to a library above common, so that common keeps no
// copy of it: the pshard executable installs the model zoo's names (models/zoo/registry.h) as model.name's choices in
// main(), before it reads any config. Installed choices are then checked and listed (`pshard config --list`) like a
// key's built-in "a|b|c"; until a program installs them the key takes any string, and the library that reads it
// rejects a value it does not know. An Error when `key` is not a string key without built-in choices, `choices` is
// empty or holds a '|', or the key's default is not one of them. Not thread-safe: call at startup.
//
//   install_config_choices("model.name", models::model_names());
void install_config_choices(const std::string& key, const std::vector<std::string>& choices);

}  // namespace pshard
