// What a worker hears of its job from the coordinator and acts on: the workers declared dead (who sends the initial
// weights, who saves the model) and the job's abort. The C++ worker and the C API keep them here, once.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/control/cluster_client.h"

namespace pshard {

// Thread-safe: the cluster client's thread records events, the worker's threads ask.
//
//   JobEvents events;
//   events.listen(cluster);                       // every kNodeDead of a worker, every kAbort
//   if (events.initialiser(cluster.rank())) ...   // rank 0, or the lowest live rank once the lower ones died
class JobEvents {
 public:
  // Records `cluster`'s events from now on. `on_abort` (optional) runs on the cluster client's thread at the job's
  // abort, after the reason was recorded (pshard's own worker exits there; a library cannot).
  void listen(ClusterClient& cluster, std::function<void(const std::string& reason)> on_abort = nullptr);
  void record(const ClusterEvent& e);  // what listen() does with each event

  // The abort's reason ("" while the job was not aborted; "no reason given" when the coordinator gave none).
  std::string aborted() const;
  // Rank `rank` sends the job's initial weights: every lower rank was declared dead (failure_policy = continue)
  // before the servers had them; rank 0 always.
  bool initialiser(uint32_t rank) const;
  // An elastic epoch's members: a rank declared dead earlier that a member holds now belongs to a worker that joined.
  void members_are_live(const std::vector<uint32_t>& members);
  // Rank `rank` saves the model: no lower rank among `members` (the last epoch's, in an elastic job; empty: every
  // rank) is alive.
  bool lowest_alive(uint32_t rank, const std::vector<uint32_t>& members) const;

 private:
  mutable std::mutex mu_;
  std::set<uint32_t> dead_;
  std::string abort_reason_;
  std::function<void(const std::string&)> on_abort_;
};

}  // namespace pshard
