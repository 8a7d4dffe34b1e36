// SliceWeights: a reply frame keeps the bytes it was made from; updates copy only while one is alive.
#include "server/kv/slice_weights.h"

#include <gtest/gtest.h>

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

}  // namespace
