// Sub-benchmarks of `pshard bench`: each registers itself from its own app/cmd_bench_<name>.cc.
#pragma once

#include <vector>

#include "app/command.h"

namespace pshard::app {

struct Benchmark {
  const char* name;     // "kv": run as `pshard bench kv [options]`
  const char* summary;  // one line for `pshard bench --help`
  CommandFn run;        // gets the arguments after the benchmark's name; returns the exit code
};

bool register_benchmark(const Benchmark& benchmark);
const std::vector<Benchmark>& benchmarks();

}  // namespace pshard::app

// Usage, at namespace scope in app/cmd_bench_<name>.cc:
//   PSHARD_BENCH(kv, "push/pull throughput and latency of a local job", run_bench_kv);
#define PSHARD_BENCH(name, summary, fn) \
  static const bool pshard_bench_registered_##name = ::pshard::app::register_benchmark({#name, summary, fn})
