// Labels, scaling rows and batch-size rows computed from run metrics.
#include "report/tables.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>

namespace pshard::report {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Sums an optional field over epochs; NaN when any epoch lacks it.
template <typename Field>
double sum_over(const std::vector<EpochRecord>& epochs, Field field) {
  double total = 0;
  for (const EpochRecord& e : epochs) {
    const std::optional<double>& v = e.*field;
    if (!v) return kNaN;
    total += *v;
  }
  return total;
}

// Sums the phases over epochs; NaN phases when any epoch lacks them (an older run).
WorkerPhaseSeconds phases_over(const std::vector<EpochRecord>& epochs) {
  WorkerPhaseSeconds total;
  for (const EpochRecord& e : epochs) {
    if (!e.phases) {
      total.s.fill(kNaN);
      return total;
    }
    total += *e.phases;
  }
  return total;
}

int64_t workers_of(const RunMetrics& run) { return run.summary ? run.summary->workers : 1; }

std::string config_value(const RunMetrics& run, const std::string& key) {
  auto it = run.config.find(key);
  return it == run.config.end() ? "(unset)" : it->second;
}

// The config without the keys that name a run rather than describe it.
std::map<std::string, std::string> comparable_config(const RunMetrics& run) {
  std::map<std::string, std::string> c = run.config;
  c.erase("run.name");
  return c;
}

}  // namespace

std::vector<std::string> differing_keys(const std::vector<RunMetrics>& runs) {
  std::set<std::string> keys;
  for (const RunMetrics& r : runs) {
    for (const auto& [k, v] : comparable_config(r)) keys.insert(k);
  }
  std::vector<std::string> out;
  for (const std::string& k : keys) {
    std::set<std::string> values;
    for (const RunMetrics& r : runs) values.insert(config_value(r, k));
    if (values.size() > 1 && k != "run.name") out.push_back(k);
  }
  return out;
}

std::vector<std::string> run_labels(const std::vector<RunMetrics>& runs) {
  std::vector<std::string> keys = differing_keys(runs);
  std::set<int64_t> worker_counts;
  for (const RunMetrics& r : runs) worker_counts.insert(workers_of(r));
  std::vector<std::string> labels;
  for (const RunMetrics& r : runs) {
    std::string label;
    if (worker_counts.size() > 1) label = "W=" + std::to_string(workers_of(r));
    for (const std::string& k : keys) label += (label.empty() ? "" : ", ") + k + "=" + config_value(r, k);
    labels.push_back(label.empty() ? r.name : label);
  }
  std::map<std::string, int> count;
  for (const std::string& l : labels) ++count[l];
  for (size_t i = 0; i < runs.size(); ++i) {
    if (count[labels[i]] > 1 && labels[i] != runs[i].name) labels[i] += " (" + runs[i].name + ")";
  }
  return labels;
}

ScalingRow scaling_row(const RunMetrics& run, size_t index) {
  ScalingRow row;
  row.run = index;
  row.workers = workers_of(run);
  row.servers = run.summary ? run.summary->servers : 0;
  row.epochs = static_cast<int64_t>(run.epochs.size());
  row.steps = run.epochs.empty() ? 0 : run.epochs.back().step;
  row.train_s = sum_over(run.epochs, &EpochRecord::epoch_s);
  row.epoch_s = row.epochs > 0 ? row.train_s / static_cast<double>(row.epochs) : kNaN;
  double steps = row.steps > 0 ? static_cast<double>(row.steps) : kNaN;
  double workers = static_cast<double>(row.workers);
  row.samples_per_s = run.summary && run.summary->samples_per_s ? *run.summary->samples_per_s : kNaN;
  row.step_s = row.train_s / steps;
  row.phases_per_step = phases_over(run.epochs);
  row.phases_per_step /= steps;
  row.model_bytes = run.summary && run.summary->model_bytes > 0 ? static_cast<double>(run.summary->model_bytes) : kNaN;
  double sent = sum_over(run.epochs, &EpochRecord::bytes_sent);
  double recv = sum_over(run.epochs, &EpochRecord::bytes_recv);
  row.traffic_bytes_per_step = (sent + recv) / steps;
  row.fp32_traffic_bytes_per_step =
      (sum_over(run.epochs, &EpochRecord::fp32_bytes_sent) + sum_over(run.epochs, &EpochRecord::fp32_bytes_recv)) /
      steps;
  row.traffic_vs_fp32 = row.traffic_bytes_per_step / row.fp32_traffic_bytes_per_step;
  row.ps_bound_bytes_per_step = 2.0 * row.model_bytes * workers;
  row.sent_bytes_per_worker_step = sent / workers / steps;
  row.ring_bytes_per_worker_step = 2.0 * (workers - 1.0) / workers * row.model_bytes;
  row.bandwidth_bytes_per_s = (sent + recv) / row.train_s;
  row.bandwidth_per_worker_bytes_per_s = row.bandwidth_bytes_per_s / workers;
  auto summary_or_nan = [&](std::optional<double> SummaryRecord::*field) {
    return run.summary && (*run.summary).*field ? *((*run.summary).*field) : kNaN;
  };
  row.host_network_bytes_per_step = summary_or_nan(&SummaryRecord::network_bytes_per_host_step);
  row.host_shm_bytes_per_step = summary_or_nan(&SummaryRecord::shm_bytes_per_host_step);
  return row;
}

std::vector<ScalingGroup> scaling_groups(const std::vector<RunMetrics>& runs) {
  std::vector<std::string> keys = differing_keys(runs);
  std::map<std::map<std::string, std::string>, std::vector<size_t>> by_config;
  std::vector<std::map<std::string, std::string>> order;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].summary || runs[i].epochs.empty()) continue;
    std::map<std::string, std::string> c = comparable_config(runs[i]);
    if (!by_config.count(c)) order.push_back(c);
    by_config[c].push_back(i);
  }
  std::vector<ScalingGroup> groups;
  for (const auto& c : order) {
    const std::vector<size_t>& members = by_config[c];
    std::set<int64_t> worker_counts;
    for (size_t i : members) worker_counts.insert(workers_of(runs[i]));
    if (worker_counts.size() < 2) continue;
    ScalingGroup g;
    for (const std::string& k : keys) {
      g.title += (g.title.empty() ? "" : ", ") + k + "=" + config_value(runs[members.front()], k);
    }
    if (g.title.empty()) g.title = "all runs";
    for (size_t i : members) g.rows.push_back(scaling_row(runs[i], i));
    std::stable_sort(g.rows.begin(), g.rows.end(),
                     [](const ScalingRow& a, const ScalingRow& b) { return a.workers < b.workers; });
    const ScalingRow base = g.rows.front();
    for (ScalingRow& r : g.rows) {
      r.speedup = base.epoch_s / r.epoch_s;
      r.efficiency = r.speedup * static_cast<double>(base.workers) / static_cast<double>(r.workers);
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

std::vector<BatchRow> batch_rows(const std::vector<RunMetrics>& runs) {
  std::vector<BatchRow> rows;
  std::set<int64_t> globals;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunMetrics& r = runs[i];
    if (!r.summary) continue;
    BatchRow row;
    row.run = i;
    row.workers = r.summary->workers;
    row.batch_size = r.summary->batch_size;
    if (row.batch_size == 0 && r.config.count("train.batch_size")) {
      row.batch_size = std::strtoll(r.config.at("train.batch_size").c_str(), nullptr, 10);
    }
    row.global_batch = r.summary->global_batch > 0 ? r.summary->global_batch : row.batch_size * row.workers;
    row.samples_per_s = r.summary->samples_per_s ? *r.summary->samples_per_s : kNaN;
    ScalingRow s = scaling_row(r, i);
    row.step_s = s.step_s;
    const EpochRecord* last = r.epochs.empty() ? nullptr : &r.epochs.back();
    row.train_loss = last && last->train_loss ? *last->train_loss : kNaN;
    row.test_loss = last && last->test_loss ? *last->test_loss : kNaN;
    row.test_acc = last && last->test_acc ? *last->test_acc : kNaN;
    globals.insert(row.global_batch);
    rows.push_back(row);
  }
  if (globals.size() < 2) return {};
  std::stable_sort(rows.begin(), rows.end(), [](const BatchRow& a, const BatchRow& b) {
    return a.workers != b.workers ? a.workers < b.workers : a.global_batch < b.global_batch;
  });
  return rows;
}

bool any_value(const std::vector<RunMetrics>& runs, std::optional<double> EpochRecord::*field) {
  for (const RunMetrics& r : runs) {
    for (const EpochRecord& e : r.epochs) {
      if (e.*field) return true;
    }
  }
  return false;
}

}  // namespace pshard::report
