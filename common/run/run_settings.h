// Which settings of a run may change when it is resumed, and a hash of the others (stored in every checkpoint).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config/config.h"

namespace pshard {

// True for the keys a resumed run may set differently from its first launch: the schema's `on_resume` column
// (common/config/schema.cc, the "on resume" column of docs/CONFIG.md): how the run is run, logged, checkpointed and
// secured. Every other key (model, data, batch size, epochs, optimizer, schedule, seed, mode, slice_bytes) fixes what
// the checkpointed weights and the schedule mean, and may not change; so does a key the schema does not know.
bool may_change_on_resume(const std::string& key);

// One fixed setting that differs: its key and both values as config text.
struct FixedSettingChange {
  std::string key;
  std::string before;  // the run's value
  std::string after;   // the new value
};

// The fixed settings (see may_change_on_resume) whose values differ between `run` and `now`, by key.
std::vector<FixedSettingChange> fixed_setting_changes(const Config& run, const Config& now);

// A 64-bit FNV-1a hash of every fixed setting's key and value: equal configs (up to the keys that may change)
// give equal hashes.
uint64_t fixed_settings_hash(const Config& cfg);

}  // namespace pshard
