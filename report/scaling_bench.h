// `pshard bench scaling`: the same job through `pshard launch` at several worker counts, then the scaling table.
#pragma once

#include <string>
#include <vector>

namespace pshard::report {

// Parses the arguments of `pshard bench scaling` (argv after "scaling"), runs
// the job once per worker count as a sweep over `workers`, writes OUT/report
// and prints the scaling table. Returns the exit code (1 when a run failed).
//
//   pshard bench scaling --workers 1,2,4,8 --servers 1 --simulate-compute 20 --config configs/fmnist_mlp.toml
//   pshard bench scaling --workers 1,2,4 --profile profiles/resnet50.json --config configs/profile_resnet50_sync.toml
int run_scaling_bench(const std::vector<std::string>& args);

// The config overrides of --profile FILE: model.name = profile, model.profile = FILE's absolute path (the runs
// may start elsewhere), synthetic-images of shape [1, 1, 1] with the profile's classes, and no evaluation (it
// would only wait the forward times over the test set). An Error when the profile is refused. `description`, when
// given, gets one line about the profile for the bench's output.
std::vector<std::string> profile_overrides(const std::string& profile_path, std::string* description = nullptr);

}  // namespace pshard::report
