// The codec table: names, none's bit-exact round trip, unknown encodings refused.
#include <gtest/gtest.h>

#include <cstring>

#include "common/compression/codec.h"
#include "common/error.h"
#include "tests/common/compression/codec_test_util.h"

namespace pshard::compression {
namespace {

using testing::decode;
using testing::encode;
using testing::random_values;

TEST(CodecTable, NamesRoundTrip) {
  for (const char* name : {"none", "fp16", "bf16", "topk", "randomk", "onebit"}) {
    Encoding e;
    ASSERT_TRUE(encoding_from_name(name, &e)) << name;
    EXPECT_STREQ(encoding_name(e), name);
    EXPECT_EQ(make_codec({e})->encoding(), e);
  }
  Encoding e;
  EXPECT_FALSE(encoding_from_name("fp8", &e));
}

TEST(CodecTable, NoneIsBitExactIncludingNanAndInfinity) {
  std::vector<float> in = random_values(1000, 1);
  in[3] = std::numeric_limits<float>::quiet_NaN();
  in[4] = -std::numeric_limits<float>::infinity();
  in[5] = -0.0f;
  in[6] = std::numeric_limits<float>::denorm_min();
  auto codec = make_codec({Encoding::NONE});
  std::vector<uint8_t> bytes = encode(*codec, in);
  ASSERT_EQ(bytes.size(), in.size() * 4);
  std::vector<float> out = decode(Encoding::NONE, bytes, in.size());
  ASSERT_EQ(out.size(), in.size());
  EXPECT_EQ(std::memcmp(out.data(), in.data(), in.size() * 4), 0);
}

TEST(CodecTable, NoneRefusesAWrongLength) {
  std::vector<uint8_t> bytes(4 * 9);
  CheckResult r = check_encoded(Encoding::NONE, bytes.data(), bytes.size(), 10);
  EXPECT_EQ(r.kind, CheckResult::kWrongLength);
  EXPECT_NE(r.why.find("expected 40"), std::string::npos) << r.why;
}

TEST(CodecTable, UnknownEncodingRefused) {
  std::vector<uint8_t> bytes(8);
  CheckResult r = check_encoded(static_cast<Encoding>(17), bytes.data(), bytes.size(), 2);
  EXPECT_EQ(r.kind, CheckResult::kBadContent);
  EXPECT_NE(r.why.find("unknown encoding 17"), std::string::npos) << r.why;
  EXPECT_THROW(make_codec({static_cast<Encoding>(17)}), Error);
}

TEST(CodecTable, SparseRatioOutOfRangeRefused) {
  EXPECT_THROW(make_codec({Encoding::TOPK, 0.0}), Error);
  EXPECT_THROW(make_codec({Encoding::RANDOMK, 1.5}), Error);
}

}  // namespace
}  // namespace pshard::compression
