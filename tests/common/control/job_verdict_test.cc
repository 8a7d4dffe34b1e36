// The coordinator's verdicts, without sockets: what a node's failure does to the job (counted as finished, nothing
// during a shutdown, the abort, or the others going on), and the job's end from the workers' records alone (running
// while a worker trains, then finished, finished without some workers, stopped, or every worker dead), and why.
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

TEST(FailureVerdict, AWorkerThatPushedTheLastStepCountsAsFinishedUnderAnyPolicy) {
  for (bool continue_policy : {false, true}) {
    const FailureVerdict v = failure_verdict({false, true}, JobPhase::kRunning, continue_policy, "worker 1 is dead");
    EXPECT_EQ(v.kind, FailureVerdict::Kind::kCountedFinished);
    EXPECT_EQ(v.reason, "worker 1 is dead");
  }
  // Before the job runs, having trained does not help: the policy decides.
  EXPECT_EQ(failure_verdict({false, true}, JobPhase::kRendezvous, false, "w").kind, FailureVerdict::Kind::kAbort);
}

TEST(FailureVerdict, TheAbortPolicyEndsTheJobNamingItself) {
  const FailureVerdict v = failure_verdict({}, JobPhase::kRunning, false, "worker 1 (h:7) is dead: no heartbeat");
  EXPECT_EQ(v.kind, FailureVerdict::Kind::kAbort);
  EXPECT_EQ(v.reason, "worker 1 (h:7) is dead: no heartbeat (cluster.failure_policy = abort)");
}

TEST(FailureVerdict, UnderContinueTheWorkersGoOnButADeadServerEndsTheJob) {
  const FailureVerdict worker = failure_verdict({}, JobPhase::kRunning, true, "worker 2 is stuck: x");
  EXPECT_EQ(worker.kind, FailureVerdict::Kind::kContinue);
  EXPECT_EQ(worker.reason, "worker 2 is stuck: x");
  const FailureVerdict server = failure_verdict({true, false}, JobPhase::kRunning, true, "server 0 is dead: y");
  EXPECT_EQ(server.kind, FailureVerdict::Kind::kAbort);
  EXPECT_EQ(server.reason, "server 0 is dead: y (a dead server always ends the job)");
}

TEST(FailureVerdict, NothingIsDecidedWhileTheJobShutsDown) {
  for (bool server : {false, true}) {
    for (bool continue_policy : {false, true}) {
      EXPECT_EQ(failure_verdict({server, false}, JobPhase::kShuttingDown, continue_policy, "r").kind,
                FailureVerdict::Kind::kDuringShutdown);
    }
  }
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
