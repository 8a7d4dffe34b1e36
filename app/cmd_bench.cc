// `pshard bench <name>`: dispatches to the sub-benchmarks registered with PSHARD_BENCH (app/bench.h).
#include <algorithm>
#include <cstdio>
#include <string>

#include "app/bench.h"
#include "common/error.h"

namespace pshard::app {
namespace {

std::vector<Benchmark>& table() {
  static std::vector<Benchmark> t;
  return t;
}

void usage(std::FILE* out) {
  std::fprintf(out, "usage: pshard bench <benchmark> [options]   (pshard bench <benchmark> --help)\n\nbenchmarks:\n");
  std::vector<Benchmark> sorted = table();
  std::sort(sorted.begin(), sorted.end(),
            [](const Benchmark& a, const Benchmark& b) { return std::string(a.name) < b.name; });
  for (const Benchmark& b : sorted) std::fprintf(out, "  %-10s %s\n", b.name, b.summary);
}

int run_bench(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    usage(args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  for (const Benchmark& b : table()) {
    if (args[0] == b.name) return b.run(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  usage(stderr);
  throw Error("unknown benchmark '" + args[0] + "'");
}

}  // namespace

bool register_benchmark(const Benchmark& benchmark) {
  table().push_back(benchmark);
  return true;
}

const std::vector<Benchmark>& benchmarks() { return table(); }

PSHARD_COMMAND(bench, "micro-benchmarks (pshard bench --help lists them)", run_bench);

}  // namespace pshard::app
