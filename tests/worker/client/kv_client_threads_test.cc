// One KvClient shared by several threads: whichever thread polls the sockets (a waiting caller or the I/O thread),
// every caller gets its own replies, and replies nobody waits for are still read.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "optim/optimizer.h"
#include "server/kv/kv_server.h"
#include "worker/client/kv_client.h"

namespace pshard {
namespace {

using Clock = std::chrono::steady_clock;

// `count` servers (BSP, one worker, SGD with lr 0.5) on 127.0.0.1 and a client's options for them.
struct Servers {
  std::vector<std::unique_ptr<KvServer>> servers;
  std::vector<std::string> endpoints;

  explicit Servers(uint32_t count) {
    for (uint32_t r = 0; r < count; ++r) {
      KvServerOptions o;
      o.rank = r;
      o.num_servers = count;
      o.num_workers = 1;
      o.job_token = "job";
      o.slice_bytes = 64;
      optim::OptimizerParams p;
      p.name = "sgd";
      p.lr = 0.5f;
      o.optimizer = optim::make_optimizer(p);
      o.lr_at = [](int64_t) { return 0.5f; };
      servers.push_back(std::make_unique<KvServer>(o));
      endpoints.push_back(servers.back()->endpoint());
    }
  }
  KvClientOptions client(const std::vector<TensorSpec>& tensors) const {
    KvClientOptions c;
    c.servers = endpoints;
    c.tensors = tensors;
    c.slice_bytes = 64;
    c.job_token = "job";
    c.request_timeout = std::chrono::milliseconds(20000);
    return c;
  }
};

// Each thread trains its own tensor with gradient 1: after its push_pull of step t the weights are exactly
// -0.5 * (t + 1). A reply delivered to the wrong caller, or a caller woken before its reply was written, shows as a
// wrong value. Thread 0 waits with wait_for(0) in a loop (polling without blocking), the others block in wait().
TEST(KvClientThreads, ThreadsSharingOneClientEachGetTheirOwnReplies) {
  const size_t kThreads = 4;
  const int64_t kSteps = 200;
  std::vector<TensorSpec> tensors;
  for (size_t t = 0; t < kThreads; ++t) tensors.push_back({"t" + std::to_string(t), 40});  // 3 slices of 16 floats
  Servers job(2);
  KvClient kv(job.client(tensors));
  {
    std::vector<float> zero(40, 0.0f);
    std::vector<KvClient::Handle> hs;
    for (const TensorSpec& t : tensors) hs.push_back(kv.init(t.name, zero.data(), zero.size()));
    for (auto h : hs) kv.wait(h);
  }
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string& name = tensors[t].name;
      std::vector<float> w(40), g(40, 1.0f);
      try {
        kv.wait(kv.zpull(name, w.data(), w.size(), 0));
        for (int64_t step = 0; step < kSteps && errors[t].empty(); ++step) {
          const KvClient::Handle h = kv.zpush_pull(name, g.data(), w.data(), w.size(), step);
          if (t == 0) {
            while (!kv.wait_for(h, std::chrono::milliseconds(0))) {
            }
          } else {
            kv.wait(h);
          }
          for (size_t i = 0; i < w.size(); ++i) {
            if (w[i] != -0.5f * static_cast<float>(step + 1)) {
              errors[t] = name + " step " + std::to_string(step) + " element " + std::to_string(i) + ": " +
                          std::to_string(w[i]);
              break;
            }
          }
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  // What a leaving worker tells the coordinator: its highest pushed step + 1, whichever thread pushed it.
  EXPECT_EQ(kv.steps_pushed(), kSteps);
}

// A request nobody waits for is still answered and read (by the client's I/O thread): the bytes of its reply are
// counted without any wait() call.
TEST(KvClientThreads, RepliesNobodyWaitsForAreRead) {
  Servers job(1);
  const std::vector<TensorSpec> tensors = {{"w", 40}};
  KvClient kv(job.client(tensors));
  std::vector<float> w(40, 0.25f);
  kv.wait(kv.init("w", w.data(), w.size()));
  ASSERT_EQ(kv.traffic().bytes_recv, 0u);
  EXPECT_EQ(kv.steps_pushed(), 0);  // an init and pulls push no step
  std::vector<float> out(40, 0.0f);
  const KvClient::Handle h = kv.zpull("w", out.data(), out.size(), 0);
  const auto limit = Clock::now() + std::chrono::seconds(10);
  while (kv.traffic().bytes_recv == 0 && Clock::now() < limit)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(kv.traffic().bytes_recv, 40 * sizeof(float));
  kv.wait(h);
  EXPECT_EQ(out, w);
  EXPECT_EQ(kv.steps_pushed(), 0);
}

}  // namespace
}  // namespace pshard
