// A worker declared dead rejoins a BSP job (join): refused for a step already passed, counted from its
// join step on (the step waits for it, then averages both gradients), on inline and update-thread slices.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/error.h"
#include "server/kv/kv_server.h"
#include "worker/client/kv_client.h"

namespace pshard {
namespace {

using std::chrono::milliseconds;

void run_join(uint64_t inline_slice_bytes) {
  KvServerOptions o;
  o.mode = Consistency::kBsp;
  o.num_workers = 2;
  o.slice_bytes = 64;  // "w" (40 floats) is 3 slices
  o.inline_slice_bytes = inline_slice_bytes;
  o.job_token = "job";
  optim::OptimizerParams p;
  p.name = "sgd";
  p.lr = 1.0f;
  o.optimizer = optim::make_optimizer(p);
  o.lr_at = [](int64_t) { return 1.0f; };
  KvServer server(o);

  const std::vector<TensorSpec> tensors = {{"w", 40}};
  auto client = [&](uint32_t rank) {
    KvClientOptions c;
    c.rank = rank;
    c.servers = {server.endpoint()};
    c.tensors = tensors;
    c.slice_bytes = 64;
    c.job_token = "job";
    c.request_timeout = milliseconds(10000);
    return std::make_unique<KvClient>(c);
  };
  auto w0 = client(0);
  std::vector<float> w(40, 0.0f), g0(40, 1.0f), g1(40, 3.0f), w1(40, -100.0f);
  w0->wait(w0->init("w", w.data(), w.size()));
  server.mark_worker_dead(1);
  for (int64_t step = 0; step < 3; ++step) w0->wait(w0->push_pull("w", g0.data(), w.data(), w.size(), step));
  EXPECT_EQ(w[0], -3.0f);  // three steps of worker 0 alone

  auto r1 = client(1);
  EXPECT_EQ(r1->servers_step(), 3);
  try {
    r1->wait(r1->join("w", w1.data(), w1.size(), 1));
    ADD_FAILURE() << "a join at a step the slices passed was accepted";
  } catch (const KvError& e) {  // a server's refusal, with its code
    EXPECT_EQ(e.code(), protocol::ErrorCode::BAD_STEP) << e.what();
    EXPECT_NE(std::string(e.what()).find("badStep"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("already at step 3"), std::string::npos) << e.what();
  }
  const KvClient::Handle join = r1->join("w", w1.data(), w1.size(), 5);
  for (int64_t step = 3; step < 5; ++step) w0->wait(w0->push_pull("w", g0.data(), w.data(), w.size(), step));
  r1->wait(join);  // the weights for step 5
  EXPECT_EQ(w1, w);
  EXPECT_EQ(w1[39], -5.0f);
  // Step 5 counts worker 1 again: worker 0's push alone does not close it.
  const KvClient::Handle h0 = w0->push_pull("w", g0.data(), w.data(), w.size(), 5);
  EXPECT_FALSE(w0->wait_for(h0, milliseconds(300)));
  r1->wait(r1->push_pull("w", g1.data(), w1.data(), w1.size(), 5));
  w0->wait(h0);
  for (size_t i = 0; i < 40; ++i) {
    EXPECT_EQ(w[i], -7.0f) << i;  // -5 - mean(1, 3)
    EXPECT_EQ(w1[i], -7.0f) << i;
  }
  // Dead again: worker 0 goes on alone.
  server.mark_worker_dead(1);
  w0->wait(w0->push_pull("w", g0.data(), w.data(), w.size(), 6));
  EXPECT_EQ(w[0], -8.0f);
}

TEST(KvJoin, RejoinedWorkerIsCountedFromItsJoinStepInlineSlices) { run_join(1u << 20); }
TEST(KvJoin, RejoinedWorkerIsCountedFromItsJoinStepUpdateThreads) { run_join(0); }

}  // namespace
}  // namespace pshard
