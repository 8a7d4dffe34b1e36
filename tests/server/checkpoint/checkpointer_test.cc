// A BSP server writes a checkpoint of every slice at each checkpoint step (every_steps, or a push that asks), a
// server restored from one goes on from its weights and step, and an async server writes none.
#include "server/checkpoint/checkpointer.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/checkpoint/checkpoint_file.h"
#include "common/error.h"
#include "server/kv/kv_server.h"
#include "worker/client/kv_client.h"

namespace pshard {
namespace {

using std::chrono::milliseconds;

struct TempDir {
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pshard-ckpt-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw Error("mkdtemp failed for " + tmpl);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

const std::vector<TensorSpec> kTensors = {{"w", 40}};  // 3 slices of 64 bytes

// One worker, sgd with lr 1: a gradient of ones takes every weight down by 1 per step.
KvServerOptions options(Consistency mode, const std::string& dir) {
  KvServerOptions o;
  o.mode = mode;
  o.slice_bytes = 64;
  o.inline_slice_bytes = 64;  // the first two slices on the socket thread, the last on an update thread
  o.job_token = "job";
  optim::OptimizerParams p;
  p.name = "sgd";
  p.lr = 1.0f;
  o.optimizer = optim::make_optimizer(p);
  o.lr_at = [](int64_t) { return 1.0f; };
  o.checkpoint_dir = dir;
  o.checkpoint_every_steps = 2;
  o.checkpoint_keep = 0;
  return o;
}

std::unique_ptr<KvClient> client(const KvServer& server) {
  KvClientOptions c;
  c.servers = {server.endpoint()};
  c.tensors = kTensors;
  c.slice_bytes = 64;
  c.job_token = "job";
  c.request_timeout = milliseconds(10000);
  return std::make_unique<KvClient>(c);
}

void train(KvClient& kv, std::vector<float>& w, int64_t from, int64_t to) {
  const std::vector<float> g(w.size(), 1.0f);
  for (int64_t step = from; step < to; ++step) kv.wait(kv.push_pull("w", g.data(), w.data(), w.size(), step));
}

TEST(Checkpointer, WritesEveryStepsAndAskedStepsWithEverySlice) {
  TempDir dir;
  KvServerOptions o = options(Consistency::kBsp, dir.path);
  std::unique_ptr<Checkpointer> checkpointer;
  o.prepare_store = server_checkpoints(o, checkpointer);
  KvServer server(o);
  ASSERT_NE(checkpointer, nullptr);
  auto kv = client(server);
  std::vector<float> w(40, 0.0f);
  kv->wait(kv->init("w", w.data(), w.size()));
  train(*kv, w, 0, 4);  // closes steps 0..3: versions 2 and 4 are checkpoint steps
  kv->request_checkpoint(4);
  train(*kv, w, 4, 5);  // version 5, asked for
  server.stop();
  checkpointer->stop();  // writes what is complete
  EXPECT_EQ(checkpointer->written(), 3u);
  for (int64_t step : {2, 4, 5}) {
    const ServerCheckpoint c = read_checkpoint(checkpoint_path(dir.path, 0, step));
    EXPECT_EQ(c.step, step);
    ASSERT_EQ(c.slices.size(), 3u);
    for (uint32_t i = 0; i < 3; ++i) {
      const CheckpointSlice& s = c.slices[i];
      EXPECT_EQ(s.id, i);
      EXPECT_EQ(s.version, step);
      EXPECT_EQ(s.updates, step);
      for (float v : s.weights) EXPECT_EQ(v, -static_cast<float>(step));
    }
  }
  EXPECT_FALSE(std::filesystem::exists(checkpoint_path(dir.path, 0, 3)));
}

TEST(Checkpointer, ARestoredServerGoesOnFromTheCheckpointsWeightsAndStep) {
  TempDir dir;
  {
    KvServerOptions o = options(Consistency::kBsp, dir.path);
    std::unique_ptr<Checkpointer> checkpointer;
    o.prepare_store = server_checkpoints(o, checkpointer);
    KvServer server(o);
    auto kv = client(server);
    std::vector<float> w(40, 0.5f);
    kv->wait(kv->init("w", w.data(), w.size()));
    train(*kv, w, 0, 3);
  }
  KvServerOptions o = options(Consistency::kBsp, dir.path);
  o.restore_path = checkpoint_path(dir.path, 0, 2);
  std::unique_ptr<Checkpointer> checkpointer;
  o.prepare_store = server_checkpoints(o, checkpointer);
  KvServer server(o);
  auto kv = client(server);
  EXPECT_EQ(kv->servers_step(), 2);
  std::vector<float> w;
  kv->wait(kv->pull("w", &w, 2));
  ASSERT_EQ(w.size(), 40u);
  for (float v : w) EXPECT_EQ(v, -1.5f);
  try {
    train(*kv, w, 1, 2);
    ADD_FAILURE() << "a push of a step before the checkpoint was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("which is at step 2"), std::string::npos) << e.what();
  }
  train(*kv, w, 2, 3);
  for (float v : w) EXPECT_EQ(v, -2.5f);
}

// A server killed while writing a checkpoint leaves DIR/.server-R.step-K.ckpt.tmp.PID: the next server of that rank
// removes its rank's, and leaves the other ranks' (another server may be writing them right now).
TEST(Checkpointer, AServerRemovesTheTemporariesAKilledServerOfItsRankLeft) {
  TempDir dir;
  const std::string stale = dir.path + "/.server-0.step-00000100.ckpt.tmp.4242";
  const std::string other_rank = dir.path + "/.server-1.step-00000100.ckpt.tmp.4243";
  const std::string not_ours = dir.path + "/.server-0.notes.tmp.4244";
  for (const std::string& f : {stale, other_rank, not_ours}) std::ofstream(f) << "partial";
  KvServerOptions o = options(Consistency::kBsp, dir.path);
  std::unique_ptr<Checkpointer> checkpointer;
  o.prepare_store = server_checkpoints(o, checkpointer);
  KvServer server(o);
  ASSERT_NE(checkpointer, nullptr);
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(other_rank));
  EXPECT_TRUE(std::filesystem::exists(not_ours));
}

TEST(Checkpointer, AnAsyncServerWritesNone) {
  TempDir dir;
  KvServerOptions o = options(Consistency::kAsp, dir.path);
  std::unique_ptr<Checkpointer> checkpointer;
  o.prepare_store = server_checkpoints(o, checkpointer);
  KvServer server(o);
  auto kv = client(server);
  std::vector<float> w(40, 0.0f);
  kv->wait(kv->init("w", w.data(), w.size()));
  kv->request_checkpoint(0);
  train(*kv, w, 0, 4);
  server.stop();
  checkpointer->stop();
  EXPECT_EQ(w[0], -4.0f);
  EXPECT_EQ(checkpointer->written(), 0u);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path));
}

}  // namespace
}  // namespace pshard
