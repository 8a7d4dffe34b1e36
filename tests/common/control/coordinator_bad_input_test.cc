// The coordinator under garbage control messages: it logs and ignores them, and the job's real
// nodes still rendezvous and finish cleanly.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/control/cluster_client.h"
#include "common/control/coordinator.h"
#include "common/transport/bounds.h"
#include "common/transport/peer_auth.h"

namespace pshard {
namespace {

using std::chrono::milliseconds;

// Ends the job as a real one ends: the worker leaves, and the server leaves once the coordinator has told it to shut
// down (leaving at once could reach the coordinator before the worker's leave: "server left before the job finished").
void finish_job(std::unique_ptr<ClusterClient>& worker, std::unique_ptr<ClusterClient>& server) {
  worker.reset();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!server->stopping() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_TRUE(server->stopping()) << "the coordinator did not tell the server to shut down";
  server.reset();
}

TEST(CoordinatorBadInput, GarbageFramesAreIgnoredAndTheJobStillRuns) {
  Coordinator::Options co;
  co.num_servers = 1;
  co.num_workers = 1;
  co.bind = "tcp://127.0.0.1:0";
  co.job_token = "token-A";
  co.heartbeat_interval = milliseconds(50);
  co.heartbeat_timeout = milliseconds(2000);
  co.rendezvous_timeout = milliseconds(10000);
  co.shutdown_timeout = milliseconds(2000);
  Coordinator coord(co);
  coord.start();

  // Before any node registered: empty frames, random bytes, a Cap'n Proto-looking header
  // announcing a huge segment, and many frames in one message.
  zmq::context_t ctx;
  zmq::socket_t raw(ctx, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 0);
  transport::apply_client_auth(raw, {}, "token-A");  // a job member that sends garbage
  raw.connect(coord.endpoint());
  std::mt19937 rng(7);
  std::vector<std::string> garbage = {"", std::string(1, '\0'), std::string(8, '\xff'),
                                      std::string("\x00\x00\x00\x00\xff\xff\xff\x7f", 8)};
  for (int i = 0; i < 50; ++i) {
    std::string s(rng() % 300, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    garbage.push_back(s);
  }
  for (const std::string& g : garbage) raw.send(zmq::buffer(g), zmq::send_flags::none);
  raw.send(zmq::str_buffer("a"), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("b"), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("c"), zmq::send_flags::none);

  auto client = [&](NodeRole role) {
    ClusterClient::Options o;
    o.coordinator = coord.endpoint();
    o.role = role;
    o.job_token = "token-A";
    o.heartbeat_interval = milliseconds(50);
    o.heartbeat_timeout = milliseconds(2000);
    o.rendezvous_timeout = milliseconds(10000);
    return std::make_unique<ClusterClient>(o);
  };
  auto server = std::async(std::launch::async, [&] { return client(NodeRole::kServer); });
  auto worker = std::async(std::launch::async, [&] { return client(NodeRole::kWorker); });
  std::unique_ptr<ClusterClient> s = server.get(), w = worker.get();
  EXPECT_EQ(w->map().num_workers, 1u);

  // After the rendezvous: more garbage, and the job still ends cleanly.
  for (const std::string& g : garbage) raw.send(zmq::buffer(g), zmq::send_flags::none);
  finish_job(w, s);
  auto r = coord.wait_for(milliseconds(5000));
  ASSERT_TRUE(r.has_value()) << "the coordinator did not finish";
  EXPECT_EQ(r->exit_code, 0) << r->reason;
}

TEST(CoordinatorBadInput, OversizedFrameDisconnectsThePeerAndTheJobStillRuns) {
  Coordinator::Options co;
  co.num_servers = 1;
  co.num_workers = 1;
  co.bind = "tcp://127.0.0.1:0";
  co.job_token = "token-A";
  co.heartbeat_interval = milliseconds(50);
  co.heartbeat_timeout = milliseconds(2000);
  co.rendezvous_timeout = milliseconds(10000);
  co.shutdown_timeout = milliseconds(2000);
  Coordinator coord(co);
  coord.start();

  // One byte over the control plane's 4 MiB: ZeroMQ drops the connection when the frame's size arrives.
  zmq::context_t ctx;
  zmq::socket_t raw(ctx, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 0);
  raw.set(zmq::sockopt::reconnect_ivl, 10000);
  transport::apply_client_auth(raw, {}, "token-A");
  const std::string monitor_ep = "inproc://coordinator-bad-input-monitor";
  ASSERT_EQ(zmq_socket_monitor(raw.handle(), monitor_ep.c_str(), ZMQ_EVENT_DISCONNECTED), 0);
  zmq::socket_t mon(ctx, zmq::socket_type::pair);
  mon.set(zmq::sockopt::rcvtimeo, 5000);
  mon.connect(monitor_ep);
  raw.connect(coord.endpoint());
  const std::string big(static_cast<size_t>(transport::kMaxControlMessageBytes) + 1, '\x7f');
  raw.send(zmq::buffer(big), zmq::send_flags::none);
  zmq::message_t event;
  ASSERT_TRUE(mon.recv(event)) << "the coordinator did not disconnect a peer sending a " << big.size() << "-byte frame";

  auto client = [&](NodeRole role) {
    ClusterClient::Options o;
    o.coordinator = coord.endpoint();
    o.role = role;
    o.job_token = "token-A";
    o.heartbeat_interval = milliseconds(50);
    o.heartbeat_timeout = milliseconds(2000);
    o.rendezvous_timeout = milliseconds(10000);
    return std::make_unique<ClusterClient>(o);
  };
  auto server = std::async(std::launch::async, [&] { return client(NodeRole::kServer); });
  auto worker = std::async(std::launch::async, [&] { return client(NodeRole::kWorker); });
  std::unique_ptr<ClusterClient> s = server.get(), w = worker.get();
  EXPECT_EQ(w->map().num_workers, 1u);
  finish_job(w, s);
  auto r = coord.wait_for(milliseconds(5000));
  ASSERT_TRUE(r.has_value()) << "the coordinator did not finish";
  EXPECT_EQ(r->exit_code, 0) << r->reason;
}

}  // namespace
}  // namespace pshard
