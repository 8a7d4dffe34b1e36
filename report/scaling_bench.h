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
int run_scaling_bench(const std::vector<std::string>& args);

}  // namespace pshard::report
