// What the coordinator's tests share: a coordinator's and a node's options, a job of in-process nodes, a node that
// registers through a raw socket, and a log of a node's cluster events.
#pragma once

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/control/cluster_client.h"
#include "common/control/control_codec.h"
#include "common/control/coordinator.h"
#include "common/control/process_notice.h"
#include "common/error.h"
#include "common/metrics/epoch_report.h"
#include "common/transport/peer_auth.h"
#include "common/util/json.h"

namespace pshard::coordinator_testing {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

inline Coordinator::Options coord_options(uint32_t servers, uint32_t workers) {
  Coordinator::Options o;
  o.num_servers = servers;
  o.num_workers = workers;
  o.bind = "tcp://127.0.0.1:0";
  o.job_token = "token-A";
  o.heartbeat_interval = milliseconds(50);
  o.heartbeat_timeout = milliseconds(400);
  o.rendezvous_timeout = milliseconds(10000);
  o.shutdown_timeout = milliseconds(2000);
  return o;
}

inline ClusterClient::Options client_options(const std::string& ep, NodeRole role, int64_t rank = -1) {
  ClusterClient::Options o;
  o.coordinator = ep;
  o.role = role;
  o.requested_rank = rank;
  o.job_token = "token-A";
  o.heartbeat_interval = milliseconds(50);
  o.heartbeat_timeout = milliseconds(2000);
  o.rendezvous_timeout = milliseconds(10000);
  return o;
}

// Creates one ClusterClient per option set concurrently (the constructor
// blocks until every node registered).
inline std::vector<std::unique_ptr<ClusterClient>> join_all(const std::vector<ClusterClient::Options>& opts) {
  std::vector<std::future<std::unique_ptr<ClusterClient>>> futures;
  for (const auto& o : opts) {
    futures.push_back(std::async(std::launch::async, [o] { return std::make_unique<ClusterClient>(o); }));
  }
  std::vector<std::unique_ptr<ClusterClient>> out;
  for (auto& f : futures) out.push_back(f.get());
  return out;
}

// A clean end of the job: the workers (nodes[servers..]) leave, then, once the coordinator has
// told the servers (nodes[0..servers)) to shut down, the servers. Resetting them in order is not
// enough: each node has its own connection, so a server's leave can reach the coordinator before
// a worker's (seen under TSan) and abort the job as "left before the job finished".
inline void end_job(std::vector<std::unique_ptr<ClusterClient>>& nodes, size_t servers) {
  for (size_t i = nodes.size(); i-- > servers;) nodes[i].reset();
  for (size_t i = 0; i < servers; ++i) {
    const auto deadline = Clock::now() + milliseconds(5000);
    while (!nodes[i]->stopping() && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(5));
    EXPECT_TRUE(nodes[i]->stopping()) << "server node " << i << " was not told to shut down";
  }
  for (size_t i = servers; i-- > 0;) nodes[i].reset();
}

inline bool same_node(const NodeInfo& a, const NodeInfo& b) {
  return a.role == b.role && a.rank == b.rank && a.endpoint == b.endpoint && a.host == b.host && a.pid == b.pid;
}

// A node that registers through a raw socket and can go silent on demand.
class RawNode {
 public:
  RawNode(zmq::context_t& ctx, const std::string& ep, NodeRole role) : sock_(ctx, zmq::socket_type::dealer) {
    sock_.set(zmq::sockopt::linger, 0);
    transport::apply_client_auth(sock_, {}, "token-A");
    sock_.connect(ep);
    capnp::MallocMessageBuilder b;
    auto r = b.initRoot<control::ControlMessage>().initRegister();
    r.setRole(control_codec::to_wire(role));
    r.setRequestedRank(-1);
    r.setHost("rawhost");
    r.setPid(4242);
    r.setJobToken("token-A");
    zmq::message_t frame = control_codec::encode(b);
    sock_.send(frame, zmq::send_flags::none);
  }

 private:
  zmq::socket_t sock_;
};

struct EventLog {
  std::mutex mu;
  std::vector<ClusterEvent> events;
  std::vector<Clock::time_point> when;
  void attach(ClusterClient& c) {
    c.on_event([this](const ClusterEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      events.push_back(e);
      when.push_back(Clock::now());
    });
  }
  bool wait_for_kind(ClusterEvent::Kind kind, milliseconds timeout, ClusterEvent* out) {
    auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      {
        std::lock_guard<std::mutex> lock(mu);
        for (const auto& e : events) {
          if (e.kind == kind) {
            *out = e;
            return true;
          }
        }
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  }
};

}  // namespace pshard::coordinator_testing
