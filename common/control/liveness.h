// Liveness: heartbeats, silent nodes and the failure policy that says what a death means (internal).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/control/coordinator.h"
#include "common/control/peers.h"

namespace pshard::coordinator_detail {

// Every node sends a heartbeat each heartbeat_interval; one silent for heartbeat_timeout is dead.
// Whether a death ends the job is the failure policy's call; the coordinator carries it out.
class Liveness {
 public:
  Liveness(const Coordinator::Options& options, const Peers& peers, Outbox& outbox)
      : opt_(options), peers_(peers), outbox_(outbox) {}

  // Any message from `p` proves it alive.
  static void heard_from(Peer& p) { p.last_seen = Clock::now(); }
  // Answers a heartbeat (the echo tells the node the coordinator is alive).
  void echo(const std::string& id, uint64_t seq);

  // Routing ids of the reachable nodes silent for longer than heartbeat_timeout at `now`.
  std::vector<std::string> silent(Clock::time_point now) const;
  // Why a silent node is dead: "no heartbeat for 5000 ms".
  std::string silence() const;

  // Tells every live node that `dead` is gone (nodeDead, with `why`).
  void announce_dead(const Peer& dead, const std::string& why);
  // To the servers (under any failure policy): `left`, a worker, left cleanly after its pushes (Peer::pushed) while
  // others may train on; no step waits for its push any more. Whether it left early is the push counts' verdict.
  void announce_left(const Peer& left);
  // Tells `stuck`, a worker declared dead while it still runs, to exit (an abort naming itself, with `reason`).
  void dismiss(const Peer& stuck, const std::string& reason);

 private:
  const Coordinator::Options& opt_;
  const Peers& peers_;
  Outbox& outbox_;
};

}  // namespace pshard::coordinator_detail
