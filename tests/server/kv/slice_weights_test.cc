// SliceWeights: a reply frame keeps the bytes it was made from; updates copy only while one is alive.
#include "server/kv/slice_weights.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

using pshard::SliceWeights;

TEST(SliceWeights, UpdatesInPlaceWhenNoReplyHoldsTheBuffer) {
  SliceWeights w(pshard::transport::BufferPool::create(1 << 20));
  const std::vector<float> init = {1, 2, 3, 4};
  w.assign(init.data(), init.size());
  const float* before = w.data();
  float* p = w.writable();
  EXPECT_EQ(p, before);
  p[0] = 10;
  EXPECT_EQ(w.data()[0], 10);
  EXPECT_EQ(w.copies(), 0u);
}

TEST(SliceWeights, AReplyInFlightKeepsTheOldStepWhileTheUpdateWritesACopy) {
  SliceWeights w(pshard::transport::BufferPool::create(1 << 20));
  const std::vector<float> init = {1, 2, 3, 4};
  w.assign(init.data(), init.size());
  zmq::message_t reply = w.frame();  // not sent yet
  ASSERT_EQ(reply.size(), 4 * sizeof(float));
  float* p = w.writable();
  for (int i = 0; i < 4; ++i) p[i] = -1;
  EXPECT_EQ(w.copies(), 1u);
  const float* sent = static_cast<const float*>(reply.data());
  EXPECT_EQ(std::vector<float>(sent, sent + 4), init);  // the reply still carries the weights it was made of
  EXPECT_EQ(w.data()[2], -1);
  // Once the reply is gone (ZeroMQ sent it), the next update is in place again.
  reply = zmq::message_t();
  const float* current = w.data();
  EXPECT_EQ(w.writable(), current);
  EXPECT_EQ(w.copies(), 1u);
}

TEST(SliceWeights, TheCopyComesFromThePoolAfterTheFirstRound) {
  auto pool = pshard::transport::BufferPool::create(1 << 20);
  SliceWeights w(pool);
  std::vector<float> init(1024, 0.5f);
  w.assign(init.data(), init.size());
  for (int round = 0; round < 5; ++round) {
    zmq::message_t reply = w.frame();
    w.writable()[0] = static_cast<float>(round);
  }
  // Two buffers alternate: the one a reply held comes back to the pool and is reused.
  EXPECT_EQ(pool->allocations(), 2u);
  EXPECT_EQ(w.copies(), 5u);
  EXPECT_EQ(w.data()[0], 4.0f);
  EXPECT_EQ(w.data()[1], 0.5f);
}

// Encoded weights (cluster.pull_precision): one encoding per change of the weights, shared by every reply (a sync
// step answers all W workers with the same bytes), redone after writable() and for another encoding; a reply made
// before the change keeps the bytes it was made of.
TEST(SliceWeights, EncodesOncePerChangeAndSharesTheBytesAmongReplies) {
  using pshard::compression::Encoding;
  SliceWeights w(pshard::transport::BufferPool::create(1 << 20));
  const std::vector<float> init = {1.0f, -2.5f, 3.25f, 1e-3f, 7.0f};
  w.assign(init.data(), init.size());
  auto expected = [&](Encoding e) {
    auto codec = pshard::compression::make_codec({e});
    std::vector<uint8_t> bytes(codec->max_encoded_bytes(init.size()));
    bytes.resize(codec->encode(w.data(), init.size(), bytes.data()));
    return bytes;
  };
  auto bytes_of = [](const zmq::message_t& m) {
    const auto* p = static_cast<const uint8_t*>(m.data());
    return std::vector<uint8_t>(p, p + m.size());
  };
  zmq::message_t first = w.encoded_frame(Encoding::BF16);
  zmq::message_t second = w.encoded_frame(Encoding::BF16);
  EXPECT_EQ(first.data(), second.data());  // the same buffer, encoded once
  EXPECT_EQ(first.size(), 2 * init.size());
  const std::vector<uint8_t> bf16_before = expected(Encoding::BF16);
  EXPECT_EQ(bytes_of(first), bf16_before);

  zmq::message_t half = w.encoded_frame(Encoding::FP16);  // another encoding is encoded anew
  EXPECT_NE(half.data(), first.data());
  EXPECT_EQ(bytes_of(half), expected(Encoding::FP16));

  w.writable()[0] = 100.0f;  // a change: the next reply is encoded from the new values
  zmq::message_t after = w.encoded_frame(Encoding::BF16);
  EXPECT_NE(after.data(), first.data());
  EXPECT_EQ(bytes_of(after), expected(Encoding::BF16));
  EXPECT_NE(bytes_of(after), bf16_before);
  EXPECT_EQ(bytes_of(first), bf16_before);  // replies still in flight keep the old step's bytes
  EXPECT_EQ(bytes_of(second), bf16_before);

  const std::vector<float> other = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
  w.assign(other.data(), other.size());  // so is a new assignment (init, restore)
  EXPECT_EQ(bytes_of(w.encoded_frame(Encoding::BF16)), expected(Encoding::BF16));
}

}  // namespace
