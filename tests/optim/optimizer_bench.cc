// Throughput of every update rule on a 64 MiB model (16 Mi floats), the servers' hot path.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "optim/optimizer.h"

namespace {

using pshard::optim::make_optimizer;
using pshard::optim::OptimizerParams;

TEST(OptimizerBench, SixtyFourMiBUpdate) {
  const size_t n = size_t{16} << 20;  // 64 MiB of float32 weights
  const int reps = 5;
  std::printf("%-9s %10s %12s\n", "rule", "ms/update", "GB/s moved");
  for (const char* name :
       {"sgd", "momentum", "nesterov", "adagrad", "adadelta", "rmsprop", "adam", "adamw", "lars", "lamb"}) {
    OptimizerParams p;
    p.name = name;
    p.weight_decay = 1e-4f;
    auto opt = make_optimizer(p);
    std::vector<float> w(n), g(n), state(n * opt->state_floats(), 0.0f);
    for (size_t i = 0; i < n; ++i) {
      w[i] = 0.01f * static_cast<float>(i % 97) - 0.48f;
      g[i] = 0.001f * static_cast<float>(i % 89) - 0.044f;
    }
    const float w0 = w[1];
    opt->apply(w.data(), g.data(), state.data(), n, 0.01f, 1);  // warm the pages
    auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) opt->apply(w.data(), g.data(), state.data(), n, 0.01f, r + 2);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / reps;
    // bytes read + written per update: w (r+w), g (r), state (r+w per float)
    const double bytes = 4.0 * n * (3 + 2 * opt->state_floats());
    std::printf("%-9s %10.2f %12.2f\n", name, ms, bytes / (ms * 1e6));
    EXPECT_TRUE(std::isfinite(w[1]) && std::isfinite(w[n - 1])) << name;
    EXPECT_NE(w[1], w0) << name;
  }
}

}  // namespace
