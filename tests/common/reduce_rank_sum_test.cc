// The rank-ordered sum of a synchronous step and its rounding contract (common/reduce/rank_sum.h): a host's partial
// sum of the lowest ranks, continued by the server, is bitwise the server's own sum; the mean folded into the last
// addition is bitwise the mean taken afterwards; another grouping is another rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/reduce/rank_sum.h"

namespace pshard::reduce {
namespace {

// W gradients of n values each with widely spread magnitudes, so that the order of additions shows in the bits.
std::vector<std::vector<float>> gradients(int workers, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f), exponent(-8.0f, 8.0f);
  std::vector<std::vector<float>> g(workers, std::vector<float>(n));
  for (auto& v : g) {
    for (float& x : v) x = value(rng) * std::exp2(exponent(rng));
  }
  return g;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The server alone: g0 + g1, then each later rank, the last one with the division.
std::vector<float> server_mean(const std::vector<std::vector<float>>& g) {
  const size_t n = g[0].size();
  const uint32_t w = static_cast<uint32_t>(g.size());
  std::vector<float> acc(n);
  if (w == 2) {
    sum_start_mean(g[0].data(), g[1].data(), acc.data(), n, w);
    return acc;
  }
  sum_start(g[0].data(), g[1].data(), acc.data(), n);
  for (uint32_t r = 2; r + 1 < w; ++r) sum_add(acc.data(), g[r].data(), n);
  sum_add_mean(acc.data(), g[w - 1].data(), n, w);
  return acc;
}

TEST(RankSum, IsTheLeftToRightFloatSumDividedOnce) {
  const auto g = gradients(5, 1001, 1);
  const auto got = server_mean(g);
  for (size_t i = 0; i < got.size(); ++i) {
    float s = g[0][i];
    for (size_t r = 1; r < g.size(); ++r) s = s + g[r][i];
    const float want = s / 5.0f;
    ASSERT_EQ(std::memcmp(&got[i], &want, sizeof want), 0) << i;
  }
}

TEST(RankSum, MeanFoldedIntoTheLastAdditionEqualsTheMeanAfterwards) {
  for (int w : {2, 3, 4, 7}) {
    const auto g = gradients(w, 4099, 10 + w);
    const size_t n = g[0].size();
    std::vector<float> sum(n), after(n);
    sum_start(g[0].data(), g[1].data(), sum.data(), n);
    for (int r = 2; r < w; ++r) sum_add(sum.data(), g[r].data(), n);
    mean(sum.data(), after.data(), n, static_cast<uint32_t>(w));
    EXPECT_TRUE(same_bits(server_mean(g), after)) << w << " workers";
  }
}

TEST(RankSum, AHostOfTheLowestRanksGivesTheServersOwnBits) {
  // 4 workers, ranks 0..2 on one host: its leader sums (g0 + g1) + g2 and pushes that; the server adds g3 and divides
  // by 4 (the host's payload counts as 3 workers).
  const auto g = gradients(4, 8191, 7);
  const size_t n = g[0].size();
  std::vector<float> host(n), server(n);
  sum_start(g[0].data(), g[1].data(), host.data(), n);
  sum_add(host.data(), g[2].data(), n);
  sum_start_mean(host.data(), g[3].data(), server.data(), n, 4);
  EXPECT_TRUE(same_bits(server, server_mean(g)));
  // One host holding every worker: the server only divides its sum.
  sum_add(host.data(), g[3].data(), n);
  mean(host.data(), host.data(), n, 4);
  EXPECT_TRUE(same_bits(host, server_mean(g)));
}

TEST(RankSum, AnotherGroupingIsAnotherRounding) {
  // Ranks 1 and 2 summed on a host beside rank 0: g0 + (g1 + g2) differs from (g0 + g1) + g2 in some bits, within
  // float rounding of the same mean; this is why only the lowest ranks may share a host's sum bitwise.
  const auto g = gradients(3, 8191, 9);
  const size_t n = g[0].size();
  std::vector<float> host(n), grouped(n);
  sum_start(g[1].data(), g[2].data(), host.data(), n);
  sum_start_mean(g[0].data(), host.data(), grouped.data(), n, 3);
  const auto ordered = server_mean(g);
  EXPECT_FALSE(same_bits(grouped, ordered));
  for (size_t i = 0; i < n; ++i) {
    const float scale = std::fabs(g[0][i]) + std::fabs(g[1][i]) + std::fabs(g[2][i]);
    ASSERT_NEAR(grouped[i], ordered[i], 2.5e-7f * scale) << i;
  }
}

}  // namespace
}  // namespace pshard::reduce
