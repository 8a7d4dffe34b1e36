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
  decode_encoded(Encoding::TOPK, out.data(), enc.encode(0, 0, a, 2, out.data()), 2, got.data());
  EXPECT_EQ(got, (std::vector<float>{1.0f, 0.0f}));
  decode_encoded(Encoding::TOPK, out.data(), enc.encode(1, 0, b, 2, out.data()), 2, got.data());
  EXPECT_EQ(got, (std::vector<float>{0.0f, 4.0f}));
  decode_encoded(Encoding::TOPK, out.data(), enc.encode(0, 0, zero, 2, out.data()), 2, got.data());
  EXPECT_EQ(got, (std::vector<float>{0.0f, 0.0f}));
  decode_encoded(Encoding::TOPK, out.data(), enc.encode(1, 0, zero, 2, out.data()), 2, got.data());
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
  enc.encode(0, 0, b, 2, out.data());
  decode_encoded(Encoding::TOPK, out.data(), enc.encode(0, 0, zero, 2, out.data()), 2, got.data());
  EXPECT_EQ(got, (std::vector<float>{0.0f, 0.0f}));
}

TEST(PushEncoder, UnknownSliceIsAnError) {
  Settings s;
  s.push = Encoding::FP16;
  PushEncoder enc(s, 0, 1);
  std::vector<uint8_t> out(4);
  const float g[] = {1.0f, 2.0f};
  EXPECT_THROW(enc.encode(1, 0, g, 2, out.data()), std::exception);
}

// A checkpoint's states: kept after the encodes of step 1, handed over at the first encode of step 2, and an encoder
// restored from them encodes every later step as the one that went on (topk's residual; randomk's residual and
// sampler), bit for bit. Without keep_states_after nothing is handed over.
TEST(PushEncoder, KeptStatesRestoreTheEncodesThatFollow) {
  for (const Encoding codec : {Encoding::TOPK, Encoding::RANDOMK}) {
    Settings s;
    s.push = codec;
    s.ratio = 0.25;
    const size_t n = 64;
    PushEncoder enc(s, 1, 2);
    std::vector<std::pair<int64_t, std::vector<ResidualSlice>>> handed;
    enc.set_states_sink([&](int64_t step, std::vector<ResidualSlice> states) { handed.emplace_back(step, states); });
    std::vector<uint8_t> out(enc.max_encoded_bytes(n)), again(enc.max_encoded_bytes(n));
    for (int64_t step = 0; step < 2; ++step) {
      if (step == 1) enc.keep_states_after(1);
      for (uint32_t slice = 0; slice < 2; ++slice) {
        const std::vector<float> g = random_values(n, static_cast<uint32_t>(10 * step + slice));
        enc.encode(slice, step, g.data(), n, out.data());
      }
    }
    EXPECT_TRUE(handed.empty()) << "handed over before step 1's encodes were known to be done";
    PushEncoder resumed(s, 1, 2);
    for (int64_t step = 2; step < 5; ++step) {
      for (uint32_t slice = 0; slice < 2; ++slice) {
        const std::vector<float> g = random_values(n, static_cast<uint32_t>(10 * step + slice));
        const size_t bytes = enc.encode(slice, step, g.data(), n, out.data());
        if (step == 2 && slice == 0) {
          ASSERT_EQ(handed.size(), 1u);
          EXPECT_EQ(handed[0].first, 1);
          ASSERT_EQ(handed[0].second.size(), 2u);
          EXPECT_EQ(handed[0].second[1].slice, 1u);
          EXPECT_EQ(handed[0].second[0].residual.size(), n);
          EXPECT_EQ(handed[0].second[0].codec_state.empty(), codec == Encoding::TOPK);
          resumed.restore(handed[0].second);
        }
        const size_t got = resumed.encode(slice, step, g.data(), n, again.data());
        ASSERT_EQ(got, bytes);
        EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + static_cast<long>(bytes)),
                  std::vector<uint8_t>(again.begin(), again.begin() + static_cast<long>(got)))
            << encoding_name(codec) << " step " << step << " slice " << slice;
      }
    }
    enc.flush();
    EXPECT_EQ(handed.size(), 1u);
  }
}

// A worker whose encodes ended at a step nobody asked it to keep (the job stopped there on another worker's request)
// hands over its states as they are: an encoder restored from them continues bit for bit.
TEST(PushEncoder, CurrentStatesStandForTheLastStep) {
  Settings s;
  s.push = Encoding::RANDOMK;
  s.ratio = 0.25;
  const size_t n = 32;
  PushEncoder enc(s, 0, 1);
  std::vector<ResidualSlice> handed;
  int64_t handed_step = -1;
  enc.set_states_sink([&](int64_t step, std::vector<ResidualSlice> states) {
    handed_step = step;
    handed = std::move(states);
  });
  std::vector<uint8_t> out(enc.max_encoded_bytes(n)), again(enc.max_encoded_bytes(n));
  for (int64_t step = 0; step < 3; ++step) {
    const std::vector<float> g = random_values(n, static_cast<uint32_t>(step));
    enc.encode(0, step, g.data(), n, out.data());
  }
  enc.keep_current_states(2);
  enc.flush();
  ASSERT_EQ(handed_step, 2);
  ASSERT_EQ(handed.size(), 1u);
  PushEncoder resumed(s, 0, 1);
  resumed.restore(handed);
  const std::vector<float> g = random_values(n, 3);
  const size_t bytes = enc.encode(0, 3, g.data(), n, out.data());
  ASSERT_EQ(resumed.encode(0, 3, g.data(), n, again.data()), bytes);
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + static_cast<long>(bytes)),
            std::vector<uint8_t>(again.begin(), again.begin() + static_cast<long>(bytes)));
}

}  // namespace
}  // namespace pshard::compression
