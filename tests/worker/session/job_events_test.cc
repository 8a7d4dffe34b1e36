// JobEvents: who sends the initial weights and who saves the model as workers die and join; the abort's reason, once.
#include "worker/session/job_events.h"

#include <gtest/gtest.h>

namespace pshard {
namespace {

ClusterEvent dead(NodeRole role, uint32_t rank) {
  ClusterEvent e;
  e.kind = ClusterEvent::Kind::kNodeDead;
  e.node.role = role;
  e.node.rank = rank;
  return e;
}

ClusterEvent abort(const std::string& reason) {
  ClusterEvent e;
  e.kind = ClusterEvent::Kind::kAbort;
  e.reason = reason;
  return e;
}

TEST(JobEvents, TheLowestLiveWorkerInitialisesAndSaves) {
  JobEvents events;
  EXPECT_TRUE(events.initialiser(0));
  EXPECT_FALSE(events.initialiser(2));
  events.record(dead(NodeRole::kWorker, 0));
  events.record(dead(NodeRole::kServer, 1));  // a server's rank is not a worker's
  EXPECT_TRUE(events.initialiser(1));
  EXPECT_FALSE(events.initialiser(2));
  EXPECT_TRUE(events.lowest_alive(1, {}));
  EXPECT_FALSE(events.lowest_alive(2, {}));
  // An elastic job's last epoch trained with 0, 2 and 3: worker 1 (alive, not a member) does not keep 2 from saving.
  EXPECT_TRUE(events.lowest_alive(2, {0, 2, 3}));
  // A worker that joined takes rank 0 again: alive from then on.
  events.members_are_live({0, 2});
  EXPECT_FALSE(events.initialiser(1));
  EXPECT_FALSE(events.lowest_alive(2, {0, 2, 3}));
}

TEST(JobEvents, TheFirstAbortIsTheReason) {
  JobEvents events;
  EXPECT_EQ(events.aborted(), "");
  events.record(abort(""));
  EXPECT_EQ(events.aborted(), "no reason given");
  events.record(abort("worker 1 is dead"));
  EXPECT_EQ(events.aborted(), "no reason given");
}

}  // namespace
}  // namespace pshard
