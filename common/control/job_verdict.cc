// The coordinator's verdicts on a node's failure and on a job's end (job_verdict.h).
#include "common/control/job_verdict.h"

namespace pshard {

FailureVerdict failure_verdict(const FailedNode& node, JobPhase phase, bool continue_policy,
                               const std::string& reason) {
  using Kind = FailureVerdict::Kind;
  if (!node.server && node.trained && phase == JobPhase::kRunning) return {Kind::kCountedFinished, reason};
  if (phase == JobPhase::kShuttingDown) return {Kind::kDuringShutdown, reason};
  if (!continue_policy) return {Kind::kAbort, reason + " (cluster.failure_policy = abort)"};
  // The servers hold the only copy of their slices: the job cannot go on without one.
  if (node.server) return {Kind::kAbort, reason + " (a dead server always ends the job)"};
  return {Kind::kContinue, reason};
}

JobVerdict workers_done(const std::vector<WorkerRecord>& workers, uint32_t num_workers) {
  uint32_t left_ok = 0;
  for (const WorkerRecord& w : workers) {
    if (w.state == WorkerRecord::State::kLive && !w.waiting_to_join) return {};
    if (w.state == WorkerRecord::State::kLeft) ++left_ok;
  }
  if (left_ok == 0) return {JobVerdict::Kind::kAllDead, "every worker is dead"};
  return {JobVerdict::Kind::kFinished, "job finished: " + std::to_string(left_ok) + " of " +
                                           std::to_string(num_workers) + " workers left successfully"};
}

JobVerdict ran_to_end(const std::vector<WorkerRecord>& workers, uint32_t num_workers, bool elastic,
                      const std::string& stopped_why, const std::map<uint32_t, std::string>& lost_why,
                      const std::string& finished) {
  if (!stopped_why.empty()) {
    return {JobVerdict::Kind::kStopped,
            stopped_why + "; pshard launch --resume RUN_DIR (or a requeued job) continues there"};
  }
  std::string lost;
  for (uint32_t rank = 0; rank < num_workers && !elastic; ++rank) {
    bool done = false;
    for (const WorkerRecord& w : workers) {
      done = done || (w.rank == rank && (w.state == WorkerRecord::State::kLeft || w.trained));
    }
    if (done) continue;
    auto why = lost_why.find(rank);
    lost += (lost.empty() ? "" : "; ") + std::string("worker ") + std::to_string(rank) +
            (why != lost_why.end() ? ": " + why->second : "");
  }
  if (!lost.empty()) return {JobVerdict::Kind::kWorkersLost, lost};
  return {JobVerdict::Kind::kFinished, finished};
}

}  // namespace pshard
