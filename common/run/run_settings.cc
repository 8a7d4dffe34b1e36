// Fixed and changeable settings of a run (see run_settings.h).
#include "common/run/run_settings.h"

#include <map>
#include <sstream>

#include "common/config/schema.h"

namespace pshard {
namespace {

// Every key with its value as config text, from the canonical TOML of the config ("key = value" per line under
// "[section]" headers).
std::map<std::string, std::string> values_of(const Config& cfg) {
  std::map<std::string, std::string> out;
  std::istringstream in(cfg.to_toml());
  std::string section;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    out[section + "." + line.substr(0, eq)] = line.substr(eq + 3);
  }
  return out;
}

}  // namespace

bool may_change_on_resume(const std::string& key) {
  const ConfigKey* k = find_config_key(key);
  return k != nullptr && k->on_resume == OnResume::kMayChange;
}

std::vector<FixedSettingChange> fixed_setting_changes(const Config& run, const Config& now) {
  const std::map<std::string, std::string> a = values_of(run), b = values_of(now);
  std::vector<FixedSettingChange> changes;
  for (const auto& [key, value] : a) {
    if (may_change_on_resume(key)) continue;
    auto it = b.find(key);
    const std::string after = it == b.end() ? "" : it->second;
    if (after != value) changes.push_back({key, value, after});
  }
  return changes;
}

uint64_t fixed_settings_hash(const Config& cfg) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& [key, value] : values_of(cfg)) {
    if (may_change_on_resume(key)) continue;
    for (char ch : key + "=" + value + "\n") {
      h ^= static_cast<unsigned char>(ch);
      h *= 1099511628211ull;
    }
  }
  return h;
}

}  // namespace pshard
