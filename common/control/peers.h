// The coordinator's table of registered processes and its outbox: what its parts share (internal).
#pragma once

#include <capnp/message.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <zmq.hpp>

#include "common/control/cluster_map.h"

namespace pshard::coordinator_detail {

using Clock = std::chrono::steady_clock;

// One process that registered.
struct Peer {
  enum class State { kRegistered, kLive, kLeft, kDead };
  std::string id;  // ZeroMQ routing id
  NodeInfo info;   // rank valid once State >= kLive
  int64_t requested_rank = -1;
  uint64_t fingerprint = 0;
  bool replaces_live = false;  // Register.replacesLive: a restarted worker that may take over a live-looking rank
  bool trained = false;        // a worker that said it pushed the job's last step: its death after costs nothing
  int64_t pushed = -1;         // a worker that left: the steps it pushed (Leave.stepsPushed; -1: not said)
  Clock::time_point registered_at;
  Clock::time_point last_seen;
  State state = State::kRegistered;
};

// Routing id -> peer. Owned by the coordinator's loop thread, like everything in this folder's
// internals: no locks.
using Peers = std::map<std::string, Peer>;

// Registered or live: the coordinator still talks to it.
bool reachable(const Peer& p);
// "worker (requested rank 1) from host a, pid 7": how a node without a rank yet is named.
std::string describe_unranked(const Peer& p);
// A peer's text for one log line, whatever it sent: at most `max_bytes`, control characters as spaces.
std::string one_line(const char* text, size_t max_bytes);

// The live node a launcher's process-ended notice names (control.capnp ProcessEnded): by role and pid, by rank unless
// `any_rank` (pshard join's worker, whose rank the coordinator chose), and on `locality` unless it is empty. nullptr:
// none (it left or died already, or a restarted process holds that rank now).
Peer* live_process(Peers& peers, NodeRole role, bool any_rank, uint32_t rank, int64_t pid, const std::string& locality);

// Sends control messages through the coordinator's ROUTER socket.
class Outbox {
 public:
  explicit Outbox(zmq::socket_t& router) : router_(router) {}

  // Never blocks: a message to an unknown or gone peer, or to one over its queue bound (a peer that does not
  // read, transport::kPeerQueueMessages), is dropped and counted.
  void send(const std::string& id, capnp::MessageBuilder& message);
  uint64_t dropped() const { return dropped_; }

  // To every peer for which `include(peer)` holds.
  template <typename Pred>
  void broadcast(const Peers& peers, capnp::MessageBuilder& message, Pred include) {
    for (const auto& [id, p] : peers) {
      if (include(p)) send(id, message);
    }
  }

 private:
  zmq::socket_t& router_;
  uint64_t dropped_ = 0;
};

}  // namespace pshard::coordinator_detail
