// The job's record in its run directory: metrics.jsonl/csv from the workers' reports, the summary
// and cluster.json (internal).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/control/cluster_map.h"
#include "common/control/coordinator.h"
#include "common/control/peers.h"
#include "common/metrics/epoch_report.h"
#include "common/metrics/metrics_writer.h"
#include "common/util/json.h"

namespace pshard::coordinator_detail {

// Workers report their own part of each epoch; the job's epoch line is written once every worker
// still in the job has reported it, so one slow worker delays the line but never splits it. Without
// a run directory nothing is written, but epochs and the summary are still logged.
class JobMetrics {
 public:
  JobMetrics(const Coordinator::Options& options, const Peers& peers);

  // The job started running: the summary's wall time counts from here.
  void start_clock() { running_since_ = Clock::now(); }
  // One metrics event (JSON text) that `from` reported; returns its kind ("epoch", "step", ...). Throws
  // pshard::Error naming the node when the text is not a valid event.
  std::string on_report(const Peer& from, const std::string& text);
  // Typed facts (control.capnp JobFact) that the metrics record: a restarted worker rejoined at `step` (a "rejoin"
  // line; its epochs before that no longer wait for it), a worker saved the model to `path` (the summary names it).
  void on_rejoined(const Peer& from, int64_t step);
  void on_model_saved(const std::string& path) { model_path_ = path; }
  // A node died or is stuck (`verdict`), as the coordinator judged it: a "failure" line, written as it happens.
  void on_node_failed(const NodeInfo& node, const std::string& verdict, const std::string& why);
  // Writes every epoch for which all workers still in the job reported (also after a worker died).
  void flush_epochs();
  // Elastic jobs: the workers (routing ids) that train `epoch`; its line waits for those of them still in the job.
  void set_epoch_members(int64_t epoch, const std::set<std::string>& members);
  // The ranks whose reports an epoch's line combines: its members (elastic jobs), else every rank.
  std::vector<uint32_t> expected_ranks(int64_t epoch) const;
  // At the job's end: writes the epochs still waiting for a report, from the reports they have (their lines
  // name the missing ranks in `missing_workers`), and warns about each worker rank that never reported an epoch.
  void flush_incomplete_epochs();
  // The summary line, once some epoch was written; `aborted`: why the job was aborted (empty: it
  // finished), stored as the summary's `aborted` field. Throws pshard::Error when it cannot be written.
  void write_summary(const std::string& aborted);
  // Replaces DIR/cluster.json (the map: who runs where) atomically; a failure is logged and makes the
  // records incomplete, it does not stop the job.
  void write_cluster_map(const ClusterMap& map);
  // False once a write to the run directory failed (logged with the path when it happened): the
  // coordinator then exits with kExitRecordsIncomplete.
  void mark_incomplete() { write_failed_ = true; }
  // The job stopped at a checkpoint (checkpoint.on_sigterm): the summary says why ("stopped") and expects no model.
  void mark_stopped(const std::string& why) { stopped_ = why; }
  // The run's length as the workers declared it (the start event's epochs x steps_per_epoch); 0: not declared.
  int64_t declared_steps() const;
  // A warning about the run as a whole: logged, and listed in the summary's "warnings".
  void warn(const std::string& text);
  // trace.steps: RUN_DIR/trace/coordinator.json, the arrival of the window's step lines (the time
  // origin of the merged timeline is this process's clock). Once; nothing without a window.
  void write_trace();
  bool complete() const { return !write_failed_ && (!metrics_ || metrics_->complete()); }

 private:
  MetricsWriter* writer();
  void on_stall(const Peer& from, Json& event);
  void write_epoch(std::vector<WorkerEpochReport> reports, const Json& missing);

  const Coordinator::Options& opt_;
  const Peers& peers_;
  std::unique_ptr<MetricsWriter> metrics_;  // opened on the first line to write
  Json start_event_ = Json::object();
  std::map<int64_t, std::map<uint32_t, WorkerEpochReport>> epoch_reports_;  // epoch -> worker rank -> report
  RunTotals totals_;
  int64_t epochs_written_ = 0;
  std::string model_path_;                  // where a worker saved the trained model ("" = none yet)
  std::string stopped_;                     // mark_stopped()
  std::vector<std::string> warnings_;       // warn()
  std::unique_ptr<Tracer> tracer_;          // trace.steps set
  std::map<uint32_t, Json> server_phases_;  // server rank -> its `server_phases` event (sent as it stops)
  int64_t last_epoch_written_ = 0;
  std::map<uint32_t, int64_t> join_step_;  // worker rank -> the step it rejoined at (a restarted worker)
  std::set<uint32_t> reported_;            // worker ranks that reported some epoch
  std::map<int64_t, std::set<std::string>> epoch_members_;  // elastic jobs: epoch -> routing ids of its workers
  Clock::time_point running_since_;
  bool write_failed_ = false;  // the summary or cluster.json could not be written
};

}  // namespace pshard::coordinator_detail
