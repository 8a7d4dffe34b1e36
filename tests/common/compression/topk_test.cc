// topk: the k largest magnitudes exactly, everything else zero; k = ceil(ratio x n); bad indices refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/compression/codec.h"
#include "tests/common/compression/codec_test_util.h"

namespace pshard::compression {
namespace {

using testing::decode;
using testing::encode;
using testing::random_values;

// k uint32 indices, then k float32 values.
std::vector<uint8_t> sparse_bytes(const std::vector<uint32_t>& idx, const std::vector<float>& values) {
  std::vector<uint8_t> b(idx.size() * 8);
  std::memcpy(b.data(), idx.data(), idx.size() * 4);
  std::memcpy(b.data() + idx.size() * 4, values.data(), values.size() * 4);
  return b;
}

TEST(TopkCodec, SendsTheLargestMagnitudesExactly) {
  const std::vector<float> in = random_values(1000, 3);
  auto c = make_codec({Encoding::TOPK, 0.01});
  std::vector<uint8_t> bytes = encode(*c, in);
  ASSERT_EQ(bytes.size(), 10u * 8);  // ceil(0.01 x 1000) = 10 indices and values
  const std::vector<float> out = decode(Encoding::TOPK, bytes, in.size());
  ASSERT_EQ(out.size(), in.size());
  std::vector<float> mags(in.size());
  for (size_t i = 0; i < in.size(); ++i) mags[i] = std::fabs(in[i]);
  std::sort(mags.rbegin(), mags.rend());
  size_t sent = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (std::fabs(in[i]) >= mags[9]) {
      EXPECT_EQ(out[i], in[i]) << i;  // bit-exact float32
      ++sent;
    } else {
      EXPECT_EQ(out[i], 0.0f) << i;
    }
  }
  EXPECT_EQ(sent, 10u);
}

// Slices of 16384 values and more take a sampled threshold first: the same set as a full sort must come out,
// including when most values tie (zeros) and when the sample misses the few large ones.
TEST(TopkCodec, LargeSlicesSendExactlyTheTopKOfAFullSort) {
  std::vector<std::vector<float>> inputs = {random_values(200704, 21), std::vector<float>(50000, 0.0f),
                                            std::vector<float>(50000, 0.0f)};
  inputs[1][12345] = 1.0f;  // one large value among zeros: ties fill the rest in index order
  for (size_t i = 0; i < 50000; i += 4096) inputs[2][i + 1] = -2.0f;  // off the sample's stride
  for (const std::vector<float>& in : inputs) {
    auto c = make_codec({Encoding::TOPK, 0.01});
    const std::vector<float> out = decode(Encoding::TOPK, encode(*c, in), in.size());
    ASSERT_EQ(out.size(), in.size());
    std::vector<size_t> order(in.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return std::fabs(in[a]) > std::fabs(in[b]); });
    const size_t k = (in.size() + 99) / 100;
    std::vector<float> expected(in.size(), 0.0f);
    for (size_t j = 0; j < k; ++j) expected[order[j]] = in[order[j]];
    EXPECT_EQ(out, expected);
  }
}

TEST(TopkCodec, RatioOneIsLossless) {
  const std::vector<float> in = random_values(257, 4);
  auto c = make_codec({Encoding::TOPK, 1.0});
  EXPECT_EQ(decode(Encoding::TOPK, encode(*c, in), in.size()), in);
}

TEST(TopkCodec, TiesAndAllZerosStillSendExactlyK) {
  const std::vector<float> in(100, 0.0f);
  auto c = make_codec({Encoding::TOPK, 0.05});
  std::vector<uint8_t> bytes = encode(*c, in);
  EXPECT_EQ(bytes.size(), 5u * 8);
  EXPECT_EQ(decode(Encoding::TOPK, bytes, in.size()), in);
}

TEST(TopkCodec, AtLeastOneValue) {
  auto c = make_codec({Encoding::TOPK, 1e-6});
  std::vector<uint8_t> bytes = encode(*c, {0.5f, -3.0f, 1.0f});
  ASSERT_EQ(bytes.size(), 8u);
  EXPECT_EQ(decode(Encoding::TOPK, bytes, 3), (std::vector<float>{0.0f, -3.0f, 0.0f}));
}

TEST(TopkCodec, IndexOutOfRangeRefused) {
  std::vector<uint8_t> b = sparse_bytes({1, 10}, {1.0f, 2.0f});
  CheckResult r = check_encoded(Encoding::TOPK, b.data(), b.size(), 10);
  EXPECT_EQ(r.kind, CheckResult::kBadContent);
  EXPECT_NE(r.why.find("index 1 is 10, out of range for 10 values"), std::string::npos) << r.why;
}

TEST(TopkCodec, RepeatedOrUnsortedIndicesRefused) {
  std::vector<uint8_t> b = sparse_bytes({3, 3}, {1.0f, 2.0f});
  CheckResult r = check_encoded(Encoding::TOPK, b.data(), b.size(), 10);
  EXPECT_EQ(r.kind, CheckResult::kBadContent);
  EXPECT_NE(r.why.find("not above the previous index 3"), std::string::npos) << r.why;
  b = sparse_bytes({5, 2}, {1.0f, 2.0f});
  EXPECT_EQ(check_encoded(Encoding::TOPK, b.data(), b.size(), 10).kind, CheckResult::kBadContent);
}

TEST(TopkCodec, BadLengthsRefused) {
  std::vector<uint8_t> b(12);  // not 8 x k
  EXPECT_EQ(check_encoded(Encoding::TOPK, b.data(), b.size(), 10).kind, CheckResult::kWrongLength);
  b.clear();  // k = 0
  EXPECT_EQ(check_encoded(Encoding::TOPK, b.data(), 0, 10).kind, CheckResult::kWrongLength);
  b = sparse_bytes({0, 1, 2}, {1, 2, 3});  // k > n
  CheckResult r = check_encoded(Encoding::TOPK, b.data(), b.size(), 2);
  EXPECT_EQ(r.kind, CheckResult::kWrongLength);
  EXPECT_NE(r.why.find("1 <= k <= 2"), std::string::npos) << r.why;
}

}  // namespace
}  // namespace pshard::compression
