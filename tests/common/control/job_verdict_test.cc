// The coordinator's verdict on a job's end, from the workers' records alone (no sockets): running while a worker
// trains, then finished, finished without some workers, stopped, or every worker dead, and why.
#include "common/control/job_verdict.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace pshard {
namespace {

using State = WorkerRecord::State;
using Kind = JobVerdict::Kind;

WorkerRecord worker(uint32_t rank, State state, bool trained = false, bool waiting = false) {
  WorkerRecord w;
  w.rank = rank;
  w.state = state;
  w.trained = trained;
  w.waiting_to_join = waiting;
  return w;
}

TEST(JobVerdict, TheJobRunsWhileAWorkerIsLive) {
  EXPECT_EQ(workers_done({worker(0, State::kLeft), worker(1, State::kLive)}, 2).kind, Kind::kRunning);
  EXPECT_EQ(workers_done({worker(0, State::kLeft), worker(1, State::kLive)}, 2).reason, "");
  // An elastic joiner waiting for an epoch's start holds nothing up.
  const JobVerdict v = workers_done({worker(0, State::kLeft), worker(1, State::kLive, false, true)}, 3);
  EXPECT_EQ(v.kind, Kind::kFinished);
  EXPECT_EQ(v.reason, "job finished: 1 of 3 workers left successfully");
}

TEST(JobVerdict, NoWorkerThatLeftSuccessfullyMeansEveryWorkerIsDead) {
  const JobVerdict v = workers_done({worker(0, State::kDead), worker(1, State::kDead, true)}, 2);
  EXPECT_EQ(v.kind, Kind::kAllDead);
  EXPECT_EQ(v.reason, "every worker is dead");
}

TEST(JobVerdict, ARankThatNoProcessFinishedIsLostWithWhy) {
  const std::string finished = "job finished: 2 of 3 workers left successfully";
  // Rank 1's first process died; its restart left: rank 1 finished. Rank 2 died after its last step: finished too.
  const std::vector<WorkerRecord> all = {worker(0, State::kLeft), worker(1, State::kDead), worker(1, State::kLeft),
                                         worker(2, State::kDead, true)};
  JobVerdict v = ran_to_end(all, 3, false, "", {{1, "killed"}}, finished);
  EXPECT_EQ(v.kind, Kind::kFinished);
  EXPECT_EQ(v.reason, finished);

  const std::vector<WorkerRecord> lost = {worker(0, State::kLeft), worker(1, State::kDead), worker(2, State::kLeft)};
  v = ran_to_end(lost, 4, false, "", {{1, "its heartbeats stopped"}}, finished);
  EXPECT_EQ(v.kind, Kind::kWorkersLost);
  EXPECT_EQ(v.reason, "worker 1: its heartbeats stopped; worker 3");  // rank 3 never registered

  // An elastic job's workers come and go: its epoch lines say who trained.
  EXPECT_EQ(ran_to_end(lost, 4, true, "", {}, finished).kind, Kind::kFinished);
}

TEST(JobVerdict, AStopAtACheckpointIsNoLoss) {
  const JobVerdict v = ran_to_end({worker(0, State::kLeft), worker(1, State::kDead)}, 2, false,
                                  "stopped at step 30 of 120 on SIGTERM", {}, "job finished: 1 of 2");
  EXPECT_EQ(v.kind, Kind::kStopped);
  EXPECT_EQ(v.reason,
            "stopped at step 30 of 120 on SIGTERM; pshard launch --resume RUN_DIR (or a requeued job) continues there");
}

}  // namespace
}  // namespace pshard
