// PushEncoder: compression_min_bytes, per-slice residuals, and error feedback only for the lossy codecs.
#include "common/compression/push_encoder.h"

#include <gtest/gtest.h>

#include "tests/common/compression/codec_test_util.h"

namespace pshard::compression {
namespace {

using testing::random_values;

TEST(PushEncoder, SmallTensorsTravelAsFloat32) {
  Settings s;
  s.push = Encoding::TOPK;
  s.pull = Encoding::BF16;
  s.min_bytes = 4096;
  PushEncoder enc(s, 0, 4);
  EXPECT_EQ(enc.push_encoding(4095), Encoding::NONE);
  EXPECT_EQ(enc.pull_encoding(4095), Encoding::NONE);
  EXPECT_EQ(enc.push_encoding(4096), Encoding::TOPK);
  EXPECT_EQ(enc.pull_encoding(4096), Encoding::BF16);
}

TEST(PushEncoder, EachSliceKeepsItsOwnResidual) {
  Settings s;
  s.push = Encoding::TOPK;
  s.ratio = 0.5;
  PushEncoder enc(s, 0, 2);
  // Slice 0 sends 1 of {1, 0} and keeps nothing; slice 1 sends the 4 of {3, 4}, keeps 3, and sends it next time.
  const float a[] = {1.0f, 0.0f}, b[] = {3.0f, 4.0f}, zero[] = {0.0f, 0.0f};
  std::vector<uint8_t> out(enc.max_encoded_bytes(2));
  std::vector<float> got(2);
  decode_encoded(Encoding::TOPK, out.data(), enc.encode(0, a, 2, out.data()), 2, got.data());
  EXPECT_EQ(got, (std::vector<float>{1.0f, 0.0f}));
  decode_encoded(Encoding::TOPK, out.data(), enc.encode(1, b, 2, out.data()), 2, got.data());
  EXPECT_EQ(got, (std::vector<float>{0.0f, 4.0f}));
  decode_encoded(Encoding::TOPK, out.data(), enc.encode(0, zero, 2, out.data()), 2, got.data());
  EXPECT_EQ(got, (std::vector<float>{0.0f, 0.0f}));
  decode_encoded(Encoding::TOPK, out.data(), enc.encode(1, zero, 2, out.data()), 2, got.data());
  EXPECT_EQ(got, (std::vector<float>{3.0f, 0.0f}));
}

TEST(PushEncoder, ErrorFeedbackOffSendsEachGradientAlone) {
  Settings s;
  s.push = Encoding::TOPK;
  s.ratio = 0.5;
  s.error_feedback = false;
  PushEncoder enc(s, 0, 1);
  const float b[] = {3.0f, 4.0f}, zero[] = {0.0f, 0.0f};
  std::vector<uint8_t> out(enc.max_encoded_bytes(2));
  std::vector<float> got(2);
  enc.encode(0, b, 2, out.data());
  decode_encoded(Encoding::TOPK, out.data(), enc.encode(0, zero, 2, out.data()), 2, got.data());
  EXPECT_EQ(got, (std::vector<float>{0.0f, 0.0f}));
}

TEST(PushEncoder, UnknownSliceIsAnError) {
  Settings s;
  s.push = Encoding::FP16;
  PushEncoder enc(s, 0, 1);
  std::vector<uint8_t> out(4);
  const float g[] = {1.0f, 2.0f};
  EXPECT_THROW(enc.encode(1, g, 2, out.data()), std::exception);
}

}  // namespace
}  // namespace pshard::compression
