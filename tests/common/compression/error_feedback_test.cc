// Error feedback: over any number of pushes, what the server decoded plus the residual still held equals the sum of
// every gradient (nothing is lost, only delayed); without it a sparse codec loses most of the sum.
#include "common/compression/error_feedback.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/compression/codec.h"
#include "tests/common/compression/codec_test_util.h"

namespace pshard::compression {
namespace {

using testing::random_values;

struct Sums {
  std::vector<double> gradients, decoded;
};

Sums push_steps(Encoding e, int steps, size_t n, ErrorFeedback* ef) {
  auto codec = make_codec({e, 0.01, 9});
  Sums s{std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  std::vector<uint8_t> bytes(codec->max_encoded_bytes(n));
  std::vector<float> out(n);
  for (int t = 0; t < steps; ++t) {
    const std::vector<float> g = random_values(n, 100 + static_cast<uint32_t>(t), 0.01f);
    const size_t used = ef ? ef->encode(*codec, g.data(), n, bytes.data()) : codec->encode(g.data(), n, bytes.data());
    EXPECT_TRUE(check_encoded(e, bytes.data(), used, n).ok());
    decode_encoded(e, bytes.data(), used, n, out.data());
    for (size_t i = 0; i < n; ++i) {
      s.gradients[i] += g[i];
      s.decoded[i] += out[i];
    }
  }
  return s;
}

class ErrorFeedbackPreservesTheSum : public ::testing::TestWithParam<Encoding> {};

TEST_P(ErrorFeedbackPreservesTheSum, DecodedPlusResidualEqualsEveryGradient) {
  const size_t n = 3000;
  ErrorFeedback ef;
  const Sums s = push_steps(GetParam(), 50, n, &ef);
  ASSERT_EQ(ef.residual().size(), n);
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::fabs(s.decoded[i] + ef.residual()[i] - s.gradients[i]));
  }
  EXPECT_LT(worst, 1e-5);  // float32 rounding of 50 additions of values ~0.01
}

TEST_P(ErrorFeedbackPreservesTheSum, ResidualStaysBounded) {
  // The residual is what is delayed: it must not grow without bound (it would, were the codec to drop values).
  const size_t n = 3000;
  ErrorFeedback ef;
  push_steps(GetParam(), 200, n, &ef);
  double norm = 0;
  for (float r : ef.residual()) norm += double(r) * r;
  double one_gradient = 0;
  for (float g : random_values(n, 1, 0.01f)) one_gradient += double(g) * g;
  EXPECT_LT(std::sqrt(norm), 200 * std::sqrt(one_gradient) / 4);
}

INSTANTIATE_TEST_SUITE_P(LossyCodecs, ErrorFeedbackPreservesTheSum,
                         ::testing::Values(Encoding::TOPK, Encoding::RANDOMK, Encoding::ONEBIT),
                         [](const ::testing::TestParamInfo<Encoding>& i) { return encoding_name(i.param); });

TEST(ErrorFeedback, WithoutItTopkLosesMostOfTheSum) {
  const size_t n = 3000;
  const Sums s = push_steps(Encoding::TOPK, 50, n, nullptr);
  double lost = 0, total = 0;
  for (size_t i = 0; i < n; ++i) {
    lost += std::fabs(s.gradients[i] - s.decoded[i]);
    total += std::fabs(s.gradients[i]);
  }
  EXPECT_GT(lost, 0.5 * total);
}

}  // namespace
}  // namespace pshard::compression
