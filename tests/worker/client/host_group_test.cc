// One push per host (cluster.host_aggregation) inside one process: three KvClients that share a host group against
// in-process servers. The host's sum gives the bits of per-worker pushes and leaves the host once per slice; a member
// whose leader never pushes, and a leader whose member never writes, fail naming the other; the leader's channel
// refuses strangers.
#include "worker/client/host_group.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/transport/shm_channel.h"
#include "optim/optimizer.h"
#include "server/kv/kv_server.h"
#include "worker/client/kv_client.h"

namespace pshard {
namespace {

constexpr uint32_t kWorkers = 3;
const std::vector<TensorSpec> kTensors = {{"w", 40}, {"b", 7}};  // slice_bytes 64: "w" is 3 slices on 2 servers

// Two BSP servers for kWorkers workers, SGD with lr 0.5, on 127.0.0.1.
struct Servers {
  std::vector<std::unique_ptr<KvServer>> servers;
  std::vector<std::string> endpoints;

  explicit Servers(const std::string& token) {
    for (uint32_t r = 0; r < 2; ++r) {
      KvServerOptions o;
      o.rank = r;
      o.num_servers = 2;
      o.num_workers = kWorkers;
      o.job_token = token;
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
  KvClientOptions client(const std::string& token, uint32_t rank, bool host, std::chrono::milliseconds timeout) const {
    KvClientOptions c;
    c.rank = rank;
    c.servers = endpoints;
    c.tensors = kTensors;
    c.slice_bytes = 64;
    c.job_token = token;
    c.request_timeout = timeout;
    if (host) {
      c.host_ranks = {0, 1, 2};
      c.host_aggregated = {1, 1};
    }
    return c;
  }
};

// A gradient that differs per worker, step and element, with values whose sum rounds (so that a different order of
// addition would show).
std::vector<float> gradient(uint32_t rank, int64_t step, size_t n) {
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i)
    g[i] = 0.1f * static_cast<float>(rank + 1) + 1e-3f * static_cast<float>(step) + 1e-7f * static_cast<float>(i);
  return g;
}

struct Outcome {
  std::vector<std::vector<float>> weights;  // per worker: "w" after the last step
  std::vector<KvTraffic> traffic;
};

// kWorkers workers, each on its own thread, push_pull both tensors for `steps` steps.
Outcome train(bool host, int steps, const std::string& token) {
  Servers s(token);
  std::vector<std::unique_ptr<KvClient>> clients;
  for (uint32_t r = 0; r < kWorkers; ++r) {
    clients.push_back(std::make_unique<KvClient>(s.client(token, r, host, std::chrono::milliseconds(20000))));
  }
  std::vector<float> w0(40, 1.0f), b0(7, -1.0f);
  clients[0]->wait(clients[0]->init("w", w0.data(), w0.size()));
  clients[0]->wait(clients[0]->init("b", b0.data(), b0.size()));
  Outcome out;
  out.weights.assign(kWorkers, std::vector<float>(40));
  std::vector<std::string> errors(kWorkers);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < kWorkers; ++r) {
    threads.emplace_back([&, r] {
      try {
        KvClient& kv = *clients[r];
        std::vector<float> w(40), b(7);
        kv.wait(kv.zpull("w", w.data(), w.size(), 0));
        kv.wait(kv.zpull("b", b.data(), b.size(), 0));
        for (int64_t t = 0; t < steps; ++t) {
          const std::vector<float> gw = gradient(r, t, 40), gb = gradient(r, t, 7);
          // Both tensors in flight at once, as a trainer's layers are.
          const KvClient::Handle hw = kv.zpush_pull("w", gw.data(), w.data(), w.size(), t);
          const KvClient::Handle hb = kv.push_pull("b", gb.data(), b.data(), b.size(), t);
          kv.wait(hb);
          kv.wait(hw);
        }
        out.weights[r] = w;
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (uint32_t r = 0; r < kWorkers; ++r) EXPECT_EQ(errors[r], "") << "worker " << r;
  for (auto& c : clients) out.traffic.push_back(c->traffic());
  return out;
}

TEST(HostGroup, AHostsSumGivesTheBitsOfPerWorkerPushesAndLeavesTheHostOnce) {
  const int steps = 12;
  const Outcome alone = train(false, steps, "job-alone");
  const Outcome host = train(true, steps, "job-host");
  for (uint32_t r = 0; r < kWorkers; ++r) {
    ASSERT_EQ(host.weights[r].size(), alone.weights[r].size());
    EXPECT_EQ(std::memcmp(host.weights[r].data(), alone.weights[r].data(), 40 * sizeof(float)), 0)
        << "worker " << r << "'s weights differ from per-worker pushes";
    EXPECT_NE(host.weights[r][0], 1.0f);  // it trained
  }
  // The leader moves the host's pushes and pulls (both tensors, every step: 47 floats each way); the members move
  // nothing through sockets after their first pulls, everything through the host's segment.
  const uint64_t model = 47 * sizeof(float);
  EXPECT_EQ(host.traffic[0].bytes_sent, 40 * sizeof(float) + 7 * sizeof(float) + steps * model);  // inits + pushes
  EXPECT_EQ(alone.traffic[1].bytes_sent, steps * model);
  for (uint32_t r = 1; r < kWorkers; ++r) {
    EXPECT_EQ(host.traffic[r].bytes_sent, 0u) << "worker " << r;
    EXPECT_EQ(host.traffic[r].bytes_recv, model) << "worker " << r;  // its pulls of step 0
    EXPECT_EQ(host.traffic[r].shm_bytes_sent, steps * model) << "worker " << r;
    EXPECT_EQ(host.traffic[r].shm_bytes_recv, steps * model) << "worker " << r;
  }
  EXPECT_EQ(host.traffic[0].shm_bytes_sent, steps * model);                   // the weights it published
  EXPECT_EQ(host.traffic[0].shm_bytes_recv, (kWorkers - 1) * steps * model);  // the members' gradients it added
}

std::string error_of(KvClient& kv, KvClient::Handle h) {
  try {
    kv.wait(h);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HostGroup, AMemberWhoseLeaderNeverPushesFailsNamingIt) {
  Servers s("job-quiet-leader");
  KvClient leader(s.client("job-quiet-leader", 0, true, std::chrono::milliseconds(800)));
  KvClient member(s.client("job-quiet-leader", 1, true, std::chrono::milliseconds(800)));
  std::vector<float> w(40, 1.0f), g(40, 1.0f);
  leader.wait(leader.init("w", w.data(), w.size()));
  const std::string e = error_of(member, member.zpush_pull("w", g.data(), w.data(), w.size(), 0));
  EXPECT_NE(e.find("worker 1: its host's leader, worker 0, did not bring the weights of w"), std::string::npos) << e;
  EXPECT_NE(e.find("for step 1 within cluster.request_timeout_ms"), std::string::npos) << e;
}

TEST(HostGroup, ALeaderWhoseMemberNeverWritesFailsNamingIt) {
  Servers s("job-quiet-member");
  KvClient leader(s.client("job-quiet-member", 0, true, std::chrono::milliseconds(800)));
  KvClient member(s.client("job-quiet-member", 1, true, std::chrono::milliseconds(800)));
  std::vector<float> w(40, 1.0f), g(40, 1.0f);
  leader.wait(leader.init("w", w.data(), w.size()));
  const std::string e = error_of(leader, leader.zpush_pull("w", g.data(), w.data(), w.size(), 0));
  EXPECT_NE(e.find("worker 0: worker 1 (on this host) gave no gradient of w"), std::string::npos) << e;
}

TEST(HostGroup, TheLeadersChannelRefusesStrangers) {
  const SliceLayout layout(kTensors, 64, 2);
  HostGroup leader({0, {0, 2}, "job-channel", &layout, std::chrono::milliseconds(1000)});
  const std::string address = transport::shm_channel_address("job-channel", "host-0");
  auto ask = [&](const std::string& request) {
    std::string reply, error;
    int fd = -1;
    EXPECT_TRUE(transport::shm_channel_call(address, request, -1, &reply, &fd, std::chrono::milliseconds(2000), &error))
        << error;
    EXPECT_LT(fd, 0);
    return reply;
  };
  const std::string fp = std::to_string(layout.fingerprint());
  EXPECT_EQ(ask("token other\nrank 2\nfingerprint " + fp + "\n"), "refused\nthe job token differs");
  EXPECT_EQ(ask("token job-channel\nrank 1\nfingerprint " + fp + "\n"),
            "refused\nworker 1 is not a member of this host's group");
  EXPECT_EQ(ask("token job-channel\nrank 2\nfingerprint 7\n"), "refused\nthe layout fingerprint differs");
  // A member with another layout is refused, naming the leader.
  const SliceLayout other({{"w", 41}}, 64, 2);
  HostGroup member({2, {0, 2}, "job-channel", &other, std::chrono::milliseconds(1000)});
  std::vector<float> g(41, 1.0f);
  try {
    member.put_gradient(0, g.data(), 16, 0, std::chrono::steady_clock::now() + std::chrono::seconds(1));
    FAIL() << "the member attached to a segment of another layout";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("its host's leader, worker 0, refused to share its segment: the layout "
                                         "fingerprint differs"),
              std::string::npos)
        << e.what();
  }
}

TEST(HostGroup, TheHostsWorkersAreThoseOfEqualLocality) {
  EXPECT_EQ(host_ranks({"a", "b", "a", "a", "b"}, 2), (std::vector<uint32_t>{0, 2, 3}));
  EXPECT_EQ(host_ranks({"a", "b", "a", "a", "b"}, 4), (std::vector<uint32_t>{1, 4}));
  EXPECT_EQ(host_ranks({"a"}, 0), (std::vector<uint32_t>{0}));
  EXPECT_TRUE(host_ranks({"a"}, 3).empty());
}

}  // namespace
}  // namespace pshard
