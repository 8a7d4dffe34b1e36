// Rendezvous: who may join a job, which ranks they get and the cluster map they are sent (internal).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/control/cluster_map.h"
#include "common/control/control.capnp.h"
#include "common/control/coordinator.h"
#include "common/control/peers.h"

namespace pshard::coordinator_detail {

// Admits the registrations of a job's nodes into the peer table until every server and worker has
// registered, then assigns ranks and sends everyone the same map. While the job runs (failure
// policy continue) a worker may rejoin in place of a dead one. Refusals are sent and logged here;
// what ends the job (a layout mismatch) is returned to the coordinator, which owns the job's phase.
class Rendezvous {
 public:
  // `endpoint` is the coordinator's bound endpoint, named in refusals; read when they are sent.
  Rendezvous(const Coordinator::Options& options, const std::string& endpoint, Peers& peers, Outbox& outbox);

  // The registrant a register message from `id` describes, or nullopt when it was refused: an
  // unknown role, another job's token, or a coordinator registering as a node.
  std::optional<Peer> read(const std::string& id, control::Register::Reader r);
  // Sends `p` a registerRefused with `reason` and logs it.
  void refuse(const Peer& p, const std::string& reason);

  // While the rendezvous is open: adds `p` to the peers, or refuses it (the job already has all
  // nodes of its role, its requested rank is out of range or taken). Returns the reason when `p`'s
  // layout fingerprint differs from an earlier node's: `p` was refused and the job cannot run.
  std::optional<std::string> admit(Peer p);
  // Every server and worker has registered (elastic jobs: every server and at least min_workers workers).
  bool complete() const;
  // Assigns ranks (requested ones, then the rest in registration order), marks every node live and
  // sends each the cluster map; returns it. `before_sending` sees the map first (the coordinator publishes it
  // there, so that a node holding its map never finds the coordinator's older).
  using MapHook = std::function<void(const ClusterMap&)>;
  const ClusterMap& hand_out_map(const MapHook& before_sending);

  // While the job runs: the live worker that `p` asks to replace (a restarted process asking for its
  // old rank before the heartbeat timeout declared the old one dead), or nullptr.
  Peer* replaced_by(const Peer& p);
  // Gives `p` the rank of a dead worker, tells the servers of its process (workerRegistered) and then sends it the
  // map with itself in it (`before_sending` sees it first); false when refused.
  bool rejoin(Peer p, const MapHook& before_sending);

  // The map as last handed out (empty before the rendezvous completed).
  const ClusterMap& map() const { return map_; }
  // Why the rendezvous is not complete: "2 of 2 servers registered; 1 of 3 workers registered
  // (missing worker ranks 1, 2)".
  std::string missing_description() const;

 private:
  uint32_t count_role(NodeRole role) const;
  uint32_t expected(NodeRole role) const;
  void assign_ranks(NodeRole role);
  // `joins_running`: to a worker that joins an elastic job while it runs.
  void send_map(const std::string& id, const NodeInfo& to, bool joins_running);

  const Coordinator::Options& opt_;
  const std::string& endpoint_;
  Peers& peers_;
  Outbox& outbox_;
  ClusterMap map_;
};

}  // namespace pshard::coordinator_detail
