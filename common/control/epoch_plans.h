// Elastic jobs: who trains each epoch, decided at the epoch's start (internal).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "common/control/cluster_map.h"
#include "common/control/coordinator.h"
#include "common/control/peers.h"

namespace pshard::coordinator_detail {

// The membership of an elastic job (cluster.min_workers > 0) changes only between epochs: a dead worker is dropped
// at once (the servers close its steps without it), a worker that joins the running job waits for the next epoch's
// start. Every live worker enters each epoch (with the step it starts at); once all have and at least
// min_workers would train it, the epoch's plan (its first step and its members) goes out:
//   - with no worker joining, to every member at once;
//   - else first to the joining workers, which have the servers count them from the first step and answer; then to
//     the others, so that no server closes the first step before the joining workers are counted in it.
// A plan, once sent to anybody, never changes: a member that dies is a dead member, as mid-epoch.
class EpochPlans {
 public:
  // `on_plan` sees each plan and the routing ids of its members, when it is decided (the coordinator's metrics).
  using PlanHook = std::function<void(const EpochPlan&, const std::set<std::string>&)>;
  EpochPlans(const Coordinator::Options& options, const Peers& peers, Outbox& outbox, PlanHook on_plan);

  // Worker `p` registered while the job runs: until an epoch's plan counts it, it holds up no epoch's start (it may
  // still be starting) and no barrier.
  void arrived(const Peer& p) { arrived_.insert(p.id); }
  // Worker `p` is at the start of `epoch` at step `step`; epoch 0: it joined the running job.
  void enter(const Peer& p, int64_t epoch, int64_t step);
  // Joining worker `p` is counted by the servers from the first step of `epoch`.
  void joined(const Peer& p, int64_t epoch);
  // A worker died or left: it no longer holds an epoch's start up. Sends what that completes.
  void worker_gone(const Peer& p);
  // Why the job cannot go on (the workers disagree on where an epoch starts, or fewer than min_workers have waited
  // longer than the rendezvous timeout for others to join); nullopt while it can.
  std::optional<std::string> check(Clock::time_point now);
  // A live worker that joined the running job and has not trained yet: it holds up neither the job's end nor a
  // barrier.
  bool waiting_to_join(const Peer& p) const;

 private:
  void try_release(Clock::time_point now);
  void send(const std::set<std::string>& ids, bool join);

  const Coordinator::Options& opt_;
  const Peers& peers_;
  Outbox& outbox_;
  PlanHook on_plan_;
  EpochPlan plan_;                          // the last plan decided (epoch 0: none yet)
  std::map<std::string, int64_t> entered_;  // routing id -> step, workers at the start of plan_.epoch + 1
  std::set<std::string> arrived_;           // routing ids of workers that joined the running job, not in a plan yet
  std::set<std::string> joiners_;           // of those, the ones waiting at the next epoch's start
  std::set<std::string> joining_;           // joining workers sent plan_ that have not answered yet
  std::set<std::string> waiting_members_;   // the other members of plan_, sent it once joining_ is empty
  std::set<std::string> member_ids_;        // routing ids of plan_'s members
  std::optional<Clock::time_point> short_since_;  // every live worker waits, but fewer than min_workers
  std::optional<std::string> broken_;
};

}  // namespace pshard::coordinator_detail
