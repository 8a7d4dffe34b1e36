// randomk: k distinct indices, values exact, a new sample each push, the same samples for the same seed.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "common/compression/codec.h"
#include "tests/common/compression/codec_test_util.h"

namespace pshard::compression {
namespace {

using testing::decode;
using testing::encode;
using testing::random_values;

std::set<size_t> nonzero(const std::vector<float>& v) {
  std::set<size_t> s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != 0.0f) s.insert(i);
  }
  return s;
}

TEST(RandomkCodec, SendsKValuesExactly) {
  const std::vector<float> in = random_values(5000, 5);
  auto c = make_codec({Encoding::RANDOMK, 0.01, 42});
  std::vector<uint8_t> bytes = encode(*c, in);
  ASSERT_EQ(bytes.size(), 50u * 8);
  const std::vector<float> out = decode(Encoding::RANDOMK, bytes, in.size());
  ASSERT_EQ(out.size(), in.size());
  EXPECT_EQ(nonzero(out).size(), 50u);
  for (size_t i : nonzero(out)) EXPECT_EQ(out[i], in[i]);
}

TEST(RandomkCodec, NewSampleEachPushSameForTheSameSeed) {
  const std::vector<float> in = random_values(5000, 6);
  auto a = make_codec({Encoding::RANDOMK, 0.01, 1});
  auto b = make_codec({Encoding::RANDOMK, 0.01, 1});
  std::vector<uint8_t> first = encode(*a, in);
  EXPECT_EQ(first, encode(*b, in));
  EXPECT_NE(first, encode(*a, in));
}

TEST(RandomkCodec, CoversEveryIndexOverManyPushes) {
  const std::vector<float> in = random_values(200, 8);
  auto c = make_codec({Encoding::RANDOMK, 0.1, 3});
  std::set<size_t> seen;
  for (int step = 0; step < 200; ++step) {
    for (size_t i : nonzero(decode(Encoding::RANDOMK, encode(*c, in), in.size()))) seen.insert(i);
  }
  EXPECT_EQ(seen.size(), in.size());
}

TEST(RandomkCodec, IndexOutOfRangeRefused) {
  std::vector<uint8_t> b(8);
  const uint32_t index = 7;
  std::memcpy(b.data(), &index, 4);
  CheckResult r = check_encoded(Encoding::RANDOMK, b.data(), b.size(), 7);
  EXPECT_EQ(r.kind, CheckResult::kBadContent);
  EXPECT_NE(r.why.find("randomk index 0 is 7, out of range"), std::string::npos) << r.why;
}

}  // namespace
}  // namespace pshard::compression
