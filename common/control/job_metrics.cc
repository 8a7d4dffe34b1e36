// The job's metrics sink: epoch lines combined from the workers' reports, the summary, cluster.json.
#include "common/control/job_metrics.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <tuple>
#include <vector>

#include "common/control/control_codec.h"
#include "common/error.h"
#include "common/metrics/event_schema.h"
#include "common/metrics/progress.h"
#include "common/util/binary_file.h"
#include "common/util/log.h"

namespace pshard::coordinator_detail {

JobMetrics::JobMetrics(const Coordinator::Options& options, const Peers& peers) : opt_(options), peers_(peers) {
  if (!opt_.trace.empty()) {
    tracer_ = std::make_unique<Tracer>(opt_.trace, "coordinator");
    tracer_->name_row(0, "metrics reports");
  }
}

void JobMetrics::write_trace() {
  if (!tracer_) return;
  write_trace_file(*tracer_, opt_.run_dir, "coordinator", ClockOffset{});
  tracer_.reset();
}

MetricsWriter* JobMetrics::writer() {
  if (!metrics_ && !opt_.run_dir.empty()) metrics_ = std::make_unique<MetricsWriter>(opt_.run_dir);
  return metrics_.get();
}

std::string JobMetrics::on_report(const Peer& from, const std::string& text) {
  const std::string where = "metrics report from " + control_codec::describe(from.info);
  Json event = Json::parse(text, where);
  if (!event.is_object() || !event.has("event") || !event.at("event").is_string()) {
    throw Error(where + ": missing string field 'event'");
  }
  const std::string kind = event.at("event").as_string();
  // The two reports the coordinator combines (a worker's part of an epoch, a server's phases) are read by their own
  // parsers; every other report is a line of metrics.jsonl, whole as sent, except the stall's field added below.
  if (kind != "worker_epoch" && kind != "server_phases") {
    if (kind == "stall") event.set("last_heard_s", Json::array());
    metrics_events::check_event(event, where);
  }
  if (kind == "start") {
    start_event_ = event;  // also feeds the summary
    // The first line of metrics.jsonl: what runs (launch's progress line reads it).
    if (MetricsWriter* w = writer()) w->write(event);
  } else if (kind == "stall") {
    on_stall(from, event);
  } else if (kind == "server_phases") {
    ServerPhaseSeconds::from_fields(event, "server_phases report");  // checked here, not when the summary is read
    event.set("rank", from.info.rank);
    server_phases_[from.info.rank] = event;  // the summary lists them
  } else if (kind == "step" && tracer_ && tracer_->traces(event.at("step").as_int())) {
    const auto now = Clock::now();
    tracer_->span(tracer_->name("step line of " + control_codec::describe(from.info)), "control", now, now,
                  TraceArgs().set("worker", from.info.rank).set("step", event.at("step").as_number()));
    if (MetricsWriter* w = writer()) w->write(event);
  } else if (kind == "worker_epoch") {
    WorkerEpochReport r = WorkerEpochReport::from_json(event);
    r.rank = from.info.rank;
    reported_.insert(r.rank);
    if (r.epoch <= last_epoch_written_) return kind;  // a rejoined worker's part of an epoch already written
    for (const auto& [measured, value, what] :
         {std::tuple(r.has_train_loss, r.loss_sum, "training loss"),
          std::tuple(r.evaluated && r.has_test_loss, r.test_loss_sum, "test loss")}) {
      if (measured && !std::isfinite(value)) {
        PSHARD_LOG(kWarn) << control_codec::describe(from.info) << " reported a non-finite " << what << " ("
                          << (std::isnan(value) ? "nan"
                              : value > 0       ? "inf"
                                                : "-inf")
                          << ") for epoch " << r.number() << ": the epoch's " << what
                          << " is recorded as such in metrics.jsonl";
      }
    }
    epoch_reports_[r.epoch][r.rank] = r;
    flush_epochs();
  } else if (MetricsWriter* w = writer()) {
    w->write(event);
  }
  return kind;
}

void JobMetrics::on_rejoined(const Peer& from, int64_t step) {
  join_step_[from.info.rank] = step;
  if (MetricsWriter* w = writer()) {
    w->write(Json::object().set("event", "rejoin").set("rank", static_cast<int64_t>(from.info.rank)).set("step", step));
  }
  flush_epochs();  // epochs that ended before it rejoined no longer wait for it
}

void JobMetrics::on_node_failed(const NodeInfo& node, const std::string& verdict, const std::string& why) {
  MetricsWriter* w = writer();
  if (!w) return;
  w->write(Json::object()
               .set("event", "failure")
               .set("role", node.role == NodeRole::kServer ? "server" : "worker")
               .set("rank", static_cast<int64_t>(node.rank))
               .set("host", node.host)
               .set("pid", node.pid)
               .set("verdict", verdict)
               .set("why", why)
               .set("wall_s", running_since_ == Clock::time_point{}
                                  ? Json()  // before the job started running
                                  : Json(std::chrono::duration<double>(Clock::now() - running_since_).count())));
}

// A server's stall, with when the coordinator last heard from each worker it waits for: a worker heard a moment
// ago is alive but not pushing (stuck in its own code); one silent for long is frozen or cut off.
void JobMetrics::on_stall(const Peer& from, Json& event) {
  const auto now = Clock::now();
  Json heard = Json::array();
  std::string who;
  for (const Json& m : event.at("missing").elements()) {
    const int64_t rank = m.as_int();
    Json last = Json();  // null: not a live worker the coordinator knows
    for (const auto& [id, p] : peers_) {
      if (p.info.role == NodeRole::kWorker && p.state == Peer::State::kLive && p.info.rank == rank) {
        last = Json(std::chrono::duration<double>(now - p.last_seen).count());
      }
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, last.is_null() ? "worker %lld" : "worker %lld (last heard %.1f s ago)",
                  static_cast<long long>(rank), last.is_null() ? 0.0 : last.as_number());
    who += (who.empty() ? "" : ", ") + std::string(buf);
    heard.push(std::move(last));
  }
  event.set("last_heard_s", std::move(heard));
  char waited[32];
  std::snprintf(waited, sizeof waited, "%.1f s", event.at("waited_s").as_number());
  PSHARD_LOG(kWarn) << control_codec::describe(from.info) << " has waited " << waited << " at step "
                    << event.at("step").as_int() << " for "
                    << (event.at("initial_weights").as_bool() ? "the initial weights of " : "") << who;
  if (MetricsWriter* w = writer()) w->write(event);
}

void JobMetrics::flush_epochs() {
  // The workers in the job during epoch e: live or left, and, for a worker that rejoined, only the epochs that
  // end after its join step (it trains and reports from there on; the epochs before are its predecessor's).
  const int64_t steps_per_epoch = start_event_.has("steps_per_epoch") ? start_event_.at("steps_per_epoch").as_int() : 0;
  auto expected_reports = [&](int64_t epoch) {
    size_t n = 0;
    auto members = epoch_members_.find(epoch);
    if (members != epoch_members_.end()) {  // elastic: the epoch's members still in the job
      for (const std::string& id : members->second) {
        auto q = peers_.find(id);
        n += q != peers_.end() && (q->second.state == Peer::State::kLive || q->second.state == Peer::State::kLeft);
      }
      return n;
    }
    for (const auto& [id, q] : peers_) {
      if (q.info.role != NodeRole::kWorker || (q.state != Peer::State::kLive && q.state != Peer::State::kLeft))
        continue;
      auto joined = join_step_.find(q.info.rank);
      if (joined != join_step_.end() && steps_per_epoch > 0 && joined->second >= epoch * steps_per_epoch) continue;
      ++n;
    }
    return n;
  };
  while (!epoch_reports_.empty() &&
         epoch_reports_.begin()->second.size() >= expected_reports(epoch_reports_.begin()->first)) {
    const int64_t epoch = epoch_reports_.begin()->first;
    std::vector<WorkerEpochReport> reports;
    for (const auto& [rank, r] : epoch_reports_.begin()->second) reports.push_back(r);
    // An elastic epoch whose member died during it: nobody trained that member's shard. Said on the line and in the
    // summary, not lost silently.
    Json missing;
    if (epoch_members_.count(epoch) != 0) {
      std::string names;
      for (uint32_t rank : expected_ranks(epoch)) {
        if (epoch_reports_.begin()->second.count(rank) != 0) continue;
        if (!missing.is_array()) missing = Json::array();
        missing.push(rank);
        names += (names.empty() ? "worker " : ", worker ") + std::to_string(rank);
      }
      if (!names.empty()) {
        warn("epoch " + std::to_string(reports.front().number()) + " trained without the shard of " + names +
             ", which left the job during the epoch: its samples of that epoch were not trained");
      }
    }
    epoch_reports_.erase(epoch_reports_.begin());
    write_epoch(std::move(reports), missing);
  }
}

std::vector<uint32_t> JobMetrics::expected_ranks(int64_t epoch) const {
  std::vector<uint32_t> ranks;
  auto members = epoch_members_.find(epoch);
  if (members == epoch_members_.end()) {
    for (uint32_t rank = 0; rank < opt_.num_workers; ++rank) ranks.push_back(rank);
    return ranks;
  }
  for (const std::string& id : members->second) {
    auto q = peers_.find(id);
    if (q != peers_.end()) ranks.push_back(q->second.info.rank);
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

void JobMetrics::set_epoch_members(int64_t epoch, const std::set<std::string>& members) {
  epoch_members_[epoch] = members;
}

void JobMetrics::flush_incomplete_epochs() {
  for (auto& [epoch, by_rank] : epoch_reports_) {
    std::vector<WorkerEpochReport> reports;
    Json missing = Json::array();
    std::string names;
    for (uint32_t rank : expected_ranks(epoch)) {
      auto it = by_rank.find(rank);
      if (it != by_rank.end()) {
        reports.push_back(it->second);
        continue;
      }
      missing.push(rank);
      names += (names.empty() ? "worker " : ", worker ") + std::to_string(rank);
    }
    if (reports.empty()) continue;
    PSHARD_LOG(kWarn) << "epoch " << epoch << " has no report from " << names
                      << " (it left or died without reporting it): its line combines the other workers' reports";
    write_epoch(std::move(reports), missing);
  }
  epoch_reports_.clear();
  if (!start_event_.has("epochs")) return;  // training never started: no epoch was due
  std::set<uint32_t> trained;               // elastic jobs: the ranks some epoch had; else every rank
  for (uint32_t rank = 0; rank < opt_.num_workers; ++rank) trained.insert(rank);
  if (!epoch_members_.empty()) {
    trained.clear();
    for (const auto& [epoch, ids] : epoch_members_) {
      for (uint32_t rank : expected_ranks(epoch)) trained.insert(rank);
    }
  }
  for (uint32_t rank : trained) {
    if (reported_.count(rank) == 0) {
      PSHARD_LOG(kWarn) << "worker " << rank
                        << " never reported an epoch (a program reports with pshard_report_epoch / ps.report()): "
                        << (reported_.empty() ? "metrics.jsonl has no epoch lines and no summary"
                                              : "its figures are missing from every epoch line");
    }
  }
}

void JobMetrics::write_epoch(std::vector<WorkerEpochReport> reports, const Json& missing) {
  const int64_t place = reports.front().epoch;  // the reports' key; the line's "epoch" is the program's numbering
  Json epoch = combine_epoch(std::move(reports));
  last_epoch_written_ = place;
  if (missing.is_array()) epoch.set("missing_workers", missing);
  totals_.add_epoch(epoch);
  ++epochs_written_;
  if (MetricsWriter* w = writer()) w->write(epoch);
  const int64_t planned = start_event_.has("epochs") ? start_event_.at("epochs").as_int() : 0;
  PSHARD_LOG(kInfo) << format_epoch_line(epoch, planned);
}

int64_t JobMetrics::declared_steps() const {
  auto count = [&](const char* key) {
    return start_event_.has(key) && start_event_.at(key).is_number() ? start_event_.at(key).as_int() : int64_t{0};
  };
  return count("epochs") * count("steps_per_epoch");
}

void JobMetrics::warn(const std::string& text) {
  PSHARD_LOG(kWarn) << text;
  warnings_.push_back(text);
}

void JobMetrics::write_summary(const std::string& aborted) {
  flush_incomplete_epochs();
  if (epochs_written_ == 0) return;
  Json summary = totals_.summary(std::chrono::duration<double>(Clock::now() - running_since_).count());
  for (const auto& [key, value] : start_event_.items()) {
    if (key != "event" && key != "epochs" && key != "steps_per_epoch" && !summary.has(key)) summary.set(key, value);
  }
  if (opt_.min_workers > 0 && !epoch_members_.empty()) {
    // Elastic: the workers of the last epoch, and the range; the members events say who trained each epoch.
    summary.set("workers", static_cast<int64_t>(epoch_members_.rbegin()->second.size()));
    summary.set("min_workers", opt_.min_workers).set("max_workers", opt_.num_workers);
  } else {
    summary.set("workers", opt_.num_workers);
  }
  summary.set("servers", opt_.num_servers);
  // The control plane's cost: the coordinator's CPU time so far (its ZeroMQ threads included; in a process that
  // runs more than the coordinator, as a test may, that process's).
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) == 0) {
    const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
    summary.set("coordinator_cpu_s", seconds(usage.ru_utime) + seconds(usage.ru_stime));
  }
  Json finished = Json::array();
  for (const auto& [id, q] : peers_) {
    if (q.info.role == NodeRole::kWorker && q.state == Peer::State::kLeft) finished.push(q.info.rank);
  }
  summary.set("workers_finished", finished);
  if (!server_phases_.empty()) {
    Json servers = Json::array();
    for (const auto& [rank, event] : server_phases_) {
      Json e = Json::object();
      for (const auto& [key, value] : event.items()) {
        if (key != "event") e.set(key, value);
      }
      servers.push(e);
    }
    summary.set("server_phases", servers);
  }
  // Where the trained model is; null when no worker saved one (e.g. no run directory, or every worker died).
  summary.set("model_file", model_path_.empty() ? Json() : Json(model_path_));
  if (!stopped_.empty()) summary.set("stopped", stopped_);
  // A program saves its own model (torch.save): pshard's model.bin is for pshard's own workers.
  const bool program = start_event_.has("program") && start_event_.at("program").type() == Json::Type::kBool &&
                       start_event_.at("program").as_bool();
  if (model_path_.empty() && !opt_.run_dir.empty() && stopped_.empty() && !program) {
    PSHARD_LOG(kWarn) << "no worker saved the model: " << opt_.run_dir << "/model.bin was not written";
  }
  if (!aborted.empty()) summary.set("aborted", aborted);
  if (!warnings_.empty()) {
    Json list = Json::array();
    for (const std::string& w : warnings_) list.push(w);
    summary.set("warnings", list);
  }
  if (MetricsWriter* w = writer()) w->write(summary);
  PSHARD_LOG(kInfo) << format_summary_line(summary, opt_.run_dir);
}

void JobMetrics::write_cluster_map(const ClusterMap& map) {
  if (opt_.run_dir.empty()) return;
  Json nodes = Json::array();
  for (const auto* list : {&map.servers, &map.workers}) {
    for (const NodeInfo& n : *list) {
      nodes.push(Json::object()
                     .set("role", role_name(n.role))
                     .set("rank", n.rank)
                     .set("host", n.host)
                     .set("pid", n.pid)
                     .set("endpoint", n.endpoint));
    }
  }
  Json doc = Json::object().set("num_servers", map.num_servers).set("num_workers", map.num_workers).set("nodes", nodes);
  try {
    // Spaced like it always was: scripts grep it (tests/launcher/scheduler/slurm_cluster_test.sh). Atomic so that
    // a reader polling for it (a test, a script) never sees half a file.
    binary::write_file_atomically(opt_.run_dir + "/cluster.json", doc.dump_spaced() + "\n", "cannot write");
  } catch (const Error& e) {
    PSHARD_LOG(kError) << e.what();
    write_failed_ = true;
  }
}

}  // namespace pshard::coordinator_detail
