// SliceWeights: a reply frame keeps the bytes it was made from; updates copy only while one is alive. Kept in a
// shared-memory slot, the weights are updated there in place under the seqlock, and a float32 frame is a copy made
// once per update.
#include "server/kv/slice_weights.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/keys/slice_layout.h"
#include "common/transport/weights_slot.h"

namespace {

using pshard::SliceWeights;

TEST(SliceWeights, UpdatesInPlaceWhenNoReplyHoldsTheBuffer) {
  SliceWeights w(pshard::transport::BufferPool::create(1 << 20));
  const std::vector<float> init = {1, 2, 3, 4};
  w.assign(init.data(), init.size());
  const float* before = w.data();
  w.update([&](float* p) {
    EXPECT_EQ(p, before);
    p[0] = 10;
  });
  EXPECT_EQ(w.data()[0], 10);
  EXPECT_EQ(w.copies(), 0u);
}

TEST(SliceWeights, AReplyInFlightKeepsTheOldStepWhileTheUpdateWritesACopy) {
  SliceWeights w(pshard::transport::BufferPool::create(1 << 20));
  const std::vector<float> init = {1, 2, 3, 4};
  w.assign(init.data(), init.size());
  zmq::message_t reply = w.frame();  // not sent yet
  ASSERT_EQ(reply.size(), 4 * sizeof(float));
  w.update([](float* p) {
    for (int i = 0; i < 4; ++i) p[i] = -1;
  });
  EXPECT_EQ(w.copies(), 1u);
  const float* sent = static_cast<const float*>(reply.data());
  EXPECT_EQ(std::vector<float>(sent, sent + 4), init);  // the reply still carries the weights it was made of
  EXPECT_EQ(w.data()[2], -1);
  // Once the reply is gone (ZeroMQ sent it), the next update is in place again.
  reply = zmq::message_t();
  const float* current = w.data();
  w.update([&](float* p) { EXPECT_EQ(p, current); });
  EXPECT_EQ(w.copies(), 1u);
}

TEST(SliceWeights, TheCopyComesFromThePoolAfterTheFirstRound) {
  auto pool = pshard::transport::BufferPool::create(1 << 20);
  SliceWeights w(pool);
  std::vector<float> init(1024, 0.5f);
  w.assign(init.data(), init.size());
  for (int round = 0; round < 5; ++round) {
    zmq::message_t reply = w.frame();
    w.update([&](float* p) { p[0] = static_cast<float>(round); });
  }
  // Two buffers alternate: the one a reply held comes back to the pool and is reused.
  EXPECT_EQ(pool->allocations(), 2u);
  EXPECT_EQ(w.copies(), 5u);
  EXPECT_EQ(w.data()[0], 4.0f);
  EXPECT_EQ(w.data()[1], 0.5f);
}

// Encoded weights (cluster.pull_precision): one encoding per change of the weights, shared by every reply (a sync
// step answers all W workers with the same bytes), redone after update() and for another encoding; a reply made
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

  w.update([](float* p) { p[0] = 100.0f; });  // a change: the next reply is encoded from the new values
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

TEST(SliceWeights, KeptInASlotTheyAreUpdatedThereAndFramesAreOneCopyPerUpdate) {
  const pshard::SliceLayout layout({{"w", 5}}, 1 << 10, 1);
  const pshard::transport::SlotTable table(layout, 0);
  std::vector<uint64_t> memory(table.bytes() / sizeof(uint64_t) + 1, 0);  // 8-byte aligned, like a mapping
  std::memset(memory.data(), 0, table.bytes());
  auto* base = reinterpret_cast<uint8_t*>(memory.data());
  pshard::transport::SlotHead* slot = table.head(base, 0);
  const float* values = pshard::transport::SlotTable::values(slot);

  SliceWeights w(pshard::transport::BufferPool::create(1 << 20));
  const std::vector<float> init = {1, 2, 3, 4, 5};
  w.assign(init.data(), init.size());  // restored before the layout's install: moves into the slot
  w.home_in(slot);
  EXPECT_TRUE(w.homed());
  EXPECT_EQ(w.data(), values);
  EXPECT_EQ(std::vector<float>(values, values + 5), init);
  EXPECT_EQ(slot->generation.load(), w.generation());
  EXPECT_EQ(slot->seq.load() % 2, 0u);

  zmq::message_t reply = w.frame();  // a copy, shared by the frames of this update
  zmq::message_t again = w.frame();
  EXPECT_EQ(reply.data(), again.data());
  EXPECT_NE(reply.data(), static_cast<const void*>(values));
  const uint64_t seq = slot->seq.load();
  w.update([&](float* p) {
    EXPECT_EQ(p, values);                 // in the slot
    EXPECT_EQ(slot->seq.load() % 2, 1u);  // readers retry while the update runs
    for (int i = 0; i < 5; ++i) p[i] = -p[i];
  });
  EXPECT_EQ(slot->seq.load(), seq + 2);
  EXPECT_EQ(slot->generation.load(), w.generation());
  EXPECT_EQ(w.copies(), 0u);
  const float* sent = static_cast<const float*>(reply.data());
  EXPECT_EQ(std::vector<float>(sent, sent + 5), init);  // the reply in flight keeps its step
  zmq::message_t after = w.frame();
  const float* now = static_cast<const float*>(after.data());
  EXPECT_EQ(std::vector<float>(now, now + 5), (std::vector<float>{-1, -2, -3, -4, -5}));
  float out[5];
  ASSERT_TRUE(pshard::transport::WeightsSlot(slot).read(out, 5));
  EXPECT_EQ(std::vector<float>(out, out + 5), (std::vector<float>{-1, -2, -3, -4, -5}));
}

}  // namespace
