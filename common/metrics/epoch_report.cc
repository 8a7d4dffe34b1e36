// Combining per-worker epoch reports into job-wide metrics.
#include "common/metrics/epoch_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "common/error.h"

namespace pshard {

void WorkerEpochReport::take_gpu_usage(GpuSampler* sampler) {
  if (!sampler) return;
  const std::optional<GpuUsage> u = sampler->take();
  if (!u) return;
  has_gpu = true;
  gpu_util_pct = u->util_pct;
  gpu_mem_peak_bytes = u->mem_peak_bytes;
}

Json WorkerEpochReport::to_json() const {
  Json j = Json::object();
  j.set("rank", rank).set("epoch", epoch).set("step", step).set("samples", samples);
  if (label && *label != epoch) j.set("label", *label);
  j.set("steps", steps).set("host", host);
  j.set("has_train_loss", has_train_loss).set("loss_sum", loss_sum);
  j.set("has_train_acc", has_train_acc).set("correct", correct);
  j.set("evaluated", evaluated).set("test_n", test_n);
  j.set("has_test_loss", has_test_loss).set("test_loss_sum", test_loss_sum);
  if (loss_means) j.set("loss_means", true);
  j.set("has_test_acc", has_test_acc).set("test_correct", test_correct);
  j.set("epoch_s", epoch_s).set("eval_s", eval_s);
  phases.set_fields(j);
  j.set("bytes_sent", bytes_sent).set("bytes_recv", bytes_recv).set("wall_s", wall_s).set("lr", lr);
  j.set("fp32_bytes_sent", fp32_bytes_sent).set("fp32_bytes_recv", fp32_bytes_recv);
  j.set("shm_bytes_sent", shm_bytes_sent).set("shm_bytes_recv", shm_bytes_recv);
  if (has_gpu) j.set("gpu_util_pct", gpu_util_pct).set("gpu_mem_peak_bytes", gpu_mem_peak_bytes);
  if (has_loss_scale) j.set("loss_scale", loss_scale).set("skipped_steps", skipped_steps);
  if (has_late) j.set("late_steps", late_steps).set("caught_up_steps", caught_up_steps);
  if (!figures.empty()) {
    Json f = Json::object();
    for (const auto& [name, value] : figures) f.set(name, value);
    j.set("figures", f);
  }
  return j;
}

bool valid_figure_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || !std::isalpha(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

WorkerEpochReport WorkerEpochReport::from_json(const Json& j) {
  auto number = [&](const char* key) {
    try {
      return j.at(key).as_number();
    } catch (const Error& e) {
      throw Error(std::string("worker epoch report: field '") + key + "': " + e.what());
    }
  };
  auto boolean = [&](const char* key) {
    try {
      return j.at(key).as_bool();
    } catch (const Error& e) {
      throw Error(std::string("worker epoch report: field '") + key + "': " + e.what());
    }
  };
  // Counts arrive as JSON numbers from another process: a whole number in [0, max] or an Error
  // (casting 1e300 or -1 to an integer type is undefined behaviour).
  auto count = [&](const char* key, double max) {
    const double v = number(key);
    if (!(v >= 0 && v <= max && v == std::floor(v))) {
      throw Error(std::string("worker epoch report: field '") + key + "': " + Json(v).dump() +
                  " is not a whole number in [0, " + Json(max).dump() + "]");
    }
    return v;
  };
  constexpr double kMaxCount = 9007199254740992.0;  // 2^53: every integer up to it is exact in a double
  WorkerEpochReport r;
  r.rank = static_cast<uint32_t>(count("rank", 4294967295.0));
  r.epoch = static_cast<int64_t>(count("epoch", kMaxCount));
  if (j.has("label")) {
    const Json& l = j.at("label");
    if (!l.is_number() || std::abs(l.as_number()) > kMaxCount || l.as_number() != std::floor(l.as_number())) {
      throw Error("worker epoch report: field 'label': " + l.dump() + " is not a whole number");
    }
    r.label = static_cast<int64_t>(l.as_number());
  }
  r.step = static_cast<int64_t>(count("step", kMaxCount));
  r.steps = static_cast<int64_t>(count("steps", kMaxCount));
  r.host = static_cast<uint32_t>(count("host", 4294967295.0));
  r.samples = static_cast<int64_t>(count("samples", kMaxCount));
  r.has_train_loss = boolean("has_train_loss");
  r.loss_sum = number("loss_sum");
  r.has_train_acc = boolean("has_train_acc");
  r.correct = static_cast<int64_t>(count("correct", kMaxCount));
  r.evaluated = boolean("evaluated");
  r.test_n = static_cast<int64_t>(count("test_n", kMaxCount));
  r.has_test_loss = boolean("has_test_loss");
  r.test_loss_sum = number("test_loss_sum");
  r.loss_means = j.has("loss_means") && j.at("loss_means").type() == Json::Type::kBool && j.at("loss_means").as_bool();
  r.has_test_acc = boolean("has_test_acc");
  r.test_correct = static_cast<int64_t>(count("test_correct", kMaxCount));
  r.epoch_s = number("epoch_s");
  r.eval_s = number("eval_s");
  r.phases = WorkerPhaseSeconds::from_fields(j, "worker epoch report");
  r.bytes_sent = static_cast<uint64_t>(count("bytes_sent", kMaxCount));
  r.bytes_recv = static_cast<uint64_t>(count("bytes_recv", kMaxCount));
  r.fp32_bytes_sent = static_cast<uint64_t>(count("fp32_bytes_sent", kMaxCount));
  r.fp32_bytes_recv = static_cast<uint64_t>(count("fp32_bytes_recv", kMaxCount));
  r.shm_bytes_sent = static_cast<uint64_t>(count("shm_bytes_sent", kMaxCount));
  r.shm_bytes_recv = static_cast<uint64_t>(count("shm_bytes_recv", kMaxCount));
  r.wall_s = number("wall_s");
  r.lr = number("lr");
  r.has_gpu = j.has("gpu_util_pct");  // optional: a worker without NVML leaves both out
  if (r.has_gpu) {
    r.gpu_util_pct = number("gpu_util_pct");
    if (!(r.gpu_util_pct >= 0 && r.gpu_util_pct <= 100)) {
      throw Error("worker epoch report: field 'gpu_util_pct': " + Json(r.gpu_util_pct).dump() + " is not in [0, 100]");
    }
    r.gpu_mem_peak_bytes = static_cast<uint64_t>(count("gpu_mem_peak_bytes", kMaxCount));
  }
  r.has_loss_scale = j.has("loss_scale");  // optional: present when the worker scales its loss
  if (r.has_loss_scale) {
    r.loss_scale = number("loss_scale");
    if (!(r.loss_scale > 0)) {
      throw Error("worker epoch report: field 'loss_scale': " + Json(r.loss_scale).dump() + " is not positive");
    }
    r.skipped_steps = static_cast<int64_t>(count("skipped_steps", kMaxCount));
  }
  r.has_late = j.has("late_steps");  // optional: present with backup workers
  if (r.has_late) {
    r.late_steps = static_cast<int64_t>(count("late_steps", kMaxCount));
    r.caught_up_steps = static_cast<int64_t>(count("caught_up_steps", kMaxCount));
  }
  if (j.has("figures")) {  // optional: a program's own figures
    const Json& f = j.at("figures");
    if (f.type() != Json::Type::kObject || f.items().size() > kMaxFigures) {
      throw Error("worker epoch report: field 'figures': not an object of at most " + std::to_string(kMaxFigures) +
                  " named numbers");
    }
    for (const auto& [name, value] : f.items()) {
      if (!valid_figure_name(name) || !value.is_numeric()) {
        throw Error("worker epoch report: figure '" + name.substr(0, 64) +
                    "': a name of [A-Za-z0-9_] starting with a letter (at most 64) and a number are needed");
      }
      r.figures[name] = value.as_number();
    }
  }
  return r;
}

Json combine_epoch(std::vector<WorkerEpochReport> reports) {
  if (reports.empty()) throw Error("combine_epoch: no worker reports");
  std::sort(reports.begin(), reports.end(),
            [](const WorkerEpochReport& a, const WorkerEpochReport& b) { return a.rank < b.rank; });
  // One figure: a sum over the workers that measured it, and the count it is a mean over. The sum is a long double
  // (x86-64: up to 1e4932), so that a worker's mean near the largest double, times its samples, does not overflow.
  struct Mean {
    long double sum = 0;
    int64_t n = 0;
    void add(bool measured, double value, int64_t count, bool is_mean = false) {
      if (!measured) return;
      sum += is_mean ? static_cast<long double>(value) * static_cast<long double>(count) : value;
      n += count;
    }
    Json value() const { return n > 0 ? Json(static_cast<double>(sum / static_cast<long double>(n))) : Json(); }
  };
  Mean train_loss, train_acc, test_loss, test_acc;
  int64_t samples = 0;
  double epoch_s = 0, eval_s = 0, wall_s = 0;
  WorkerPhaseSeconds phases;
  uint64_t sent = 0, recv = 0, fp32_sent = 0, fp32_recv = 0, shm_sent = 0, shm_recv = 0;
  int64_t steps = 0;
  struct HostBytes {
    int64_t workers = 0;
    uint64_t sent = 0, recv = 0, shm_sent = 0, shm_recv = 0;
  };
  std::map<uint32_t, HostBytes> hosts;
  Json workers = Json::array();
  Mean gpu_util;
  uint64_t gpu_mem_peak = 0;
  bool scaled = false;
  double loss_scale = 0;
  int64_t skipped = 0;
  bool has_late = false;
  int64_t late = 0;
  std::map<std::string, Mean> figures;  // a program's own, weighted by the test samples or the samples behind them
  for (const WorkerEpochReport& r : reports) {
    for (const auto& [name, value] : r.figures) {
      figures[name].add(true, value, r.evaluated && r.test_n > 0 ? r.test_n : std::max<int64_t>(r.samples, 1), true);
    }
    if (r.has_loss_scale) {
      scaled = true;
      loss_scale = std::max(loss_scale, r.loss_scale);
      skipped = std::max(skipped, r.skipped_steps);
    }
    gpu_util.add(r.has_gpu, r.gpu_util_pct, 1);
    if (r.has_gpu) gpu_mem_peak = std::max(gpu_mem_peak, r.gpu_mem_peak_bytes);
    samples += r.samples;
    train_loss.add(r.has_train_loss, r.loss_sum, r.samples, r.loss_means);
    train_acc.add(r.has_train_acc, static_cast<double>(r.correct), r.samples);
    test_loss.add(r.evaluated && r.has_test_loss, r.test_loss_sum, r.test_n, r.loss_means);
    test_acc.add(r.evaluated && r.has_test_acc, static_cast<double>(r.test_correct), r.test_n);
    // The job's epoch lasts as long as its slowest worker.
    epoch_s = std::max(epoch_s, r.epoch_s);
    eval_s = std::max(eval_s, r.eval_s);
    wall_s = std::max(wall_s, r.wall_s);
    phases += r.phases;
    sent += r.bytes_sent;
    recv += r.bytes_recv;
    fp32_sent += r.fp32_bytes_sent;
    fp32_recv += r.fp32_bytes_recv;
    shm_sent += r.shm_bytes_sent;
    shm_recv += r.shm_bytes_recv;
    steps = std::max(steps, r.steps);
    HostBytes& h = hosts[r.host];
    ++h.workers;
    h.sent += r.bytes_sent;
    h.recv += r.bytes_recv;
    h.shm_sent += r.shm_bytes_sent;
    h.shm_recv += r.shm_bytes_recv;
    Json w = Json::object().set("rank", r.rank).set("samples", r.samples).set("epoch_s", r.epoch_s);
    r.phases.set_fields(w);
    if (r.has_gpu) w.set("gpu_util_pct", r.gpu_util_pct).set("gpu_mem_peak_bytes", r.gpu_mem_peak_bytes);
    if (r.has_late) {
      has_late = true;
      late += r.late_steps;
      w.set("late_steps", r.late_steps).set("caught_up_steps", r.caught_up_steps);
    }
    workers.push(w.set("bytes_sent", r.bytes_sent)
                     .set("bytes_recv", r.bytes_recv)
                     .set("shm_bytes_sent", r.shm_bytes_sent)
                     .set("shm_bytes_recv", r.shm_bytes_recv));
  }
  const WorkerEpochReport& first = reports.front();
  double n = static_cast<double>(reports.size());
  Json e = Json::object();
  // The program's own numbering is recorded as given; where it is not the place in the run, that is kept beside it.
  e.set("event", "epoch").set("epoch", first.number()).set("step", first.step);
  if (first.number() != first.epoch) e.set("epoch_index", first.epoch);
  e.set("train_loss", train_loss.value()).set("train_acc", train_acc.value());
  e.set("test_loss", test_loss.value()).set("test_acc", test_acc.value());
  e.set("samples_per_s", epoch_s > 0 ? Json(samples / epoch_s) : Json());
  e.set("epoch_s", epoch_s).set("eval_s", eval_s);
  phases /= n;
  phases.set_fields(e);
  e.set("bytes_sent", sent).set("bytes_recv", recv).set("wall_s", wall_s).set("lr", first.lr);
  e.set("fp32_bytes_sent", fp32_sent).set("fp32_bytes_recv", fp32_recv);
  e.set("shm_bytes_sent", shm_sent).set("shm_bytes_recv", shm_recv);
  e.set("samples", samples).set("steps", steps);
  Json host_list = Json::array();
  double net_max = 0, shm_max = 0;
  for (const auto& [rank, h] : hosts) {
    host_list.push(Json::object()
                       .set("host", rank)
                       .set("workers", h.workers)
                       .set("bytes_sent", h.sent)
                       .set("bytes_recv", h.recv)
                       .set("shm_bytes_sent", h.shm_sent)
                       .set("shm_bytes_recv", h.shm_recv));
    net_max = std::max(net_max, static_cast<double>(h.sent + h.recv));
    shm_max = std::max(shm_max, static_cast<double>(h.shm_sent + h.shm_recv));
  }
  e.set("hosts", host_list);
  e.set("network_bytes_per_host_step", steps > 0 ? Json(net_max / static_cast<double>(steps)) : Json());
  e.set("shm_bytes_per_host_step", steps > 0 ? Json(shm_max / static_cast<double>(steps)) : Json());
  if (gpu_util.n > 0) e.set("gpu_util_pct", gpu_util.value()).set("gpu_mem_peak_bytes", gpu_mem_peak);
  if (scaled) e.set("loss_scale", loss_scale).set("skipped_steps", skipped);
  if (has_late) {
    // The workers late in more than kStragglerShare of the epoch's steps, by rank: [{rank, late_steps}].
    Json stragglers = Json::array();
    for (const WorkerEpochReport& r : reports) {
      if (r.has_late && steps > 0 && static_cast<double>(r.late_steps) > kStragglerShare * static_cast<double>(steps)) {
        stragglers.push(Json::object().set("rank", r.rank).set("late_steps", r.late_steps));
      }
    }
    e.set("late_steps", late).set("stragglers", stragglers);
  }
  if (!figures.empty()) {
    Json f = Json::object();
    for (const auto& [name, mean] : figures) f.set(name, mean.value());
    e.set("figures", f);
  }
  if (reports.size() > 1 || first.bytes_sent + first.bytes_recv > 0) e.set("workers", workers);
  return e;
}

void RunTotals::add_epoch(const Json& epoch_event) {
  ++epochs_;
  last_ = epoch_event;
  auto num = [&](const char* key) {
    return epoch_event.has(key) && epoch_event.at(key).is_number() ? epoch_event.at(key).as_number() : 0.0;
  };
  samples_ += num("samples");
  train_s_ += num("epoch_s");
  for (size_t i = 0; i < WorkerPhaseSeconds::kCount; ++i) phases_.s[i] += num(WorkerPhaseSeconds::names()[i]);
  bytes_sent_ += num("bytes_sent");
  bytes_recv_ += num("bytes_recv");
  fp32_bytes_sent_ += num("fp32_bytes_sent");
  fp32_bytes_recv_ += num("fp32_bytes_recv");
  shm_bytes_sent_ += num("shm_bytes_sent");
  shm_bytes_recv_ += num("shm_bytes_recv");
  steps_ += num("steps");
  if (epoch_event.has("hosts") && epoch_event.at("hosts").is_array()) {
    for (const Json& h : epoch_event.at("hosts").elements()) {
      auto hnum = [&](const char* key) { return h.has(key) && h.at(key).is_number() ? h.at(key).as_number() : 0.0; };
      auto& [net, shm] = host_bytes_[static_cast<uint32_t>(hnum("host"))];
      net += hnum("bytes_sent") + hnum("bytes_recv");
      shm += hnum("shm_bytes_sent") + hnum("shm_bytes_recv");
    }
  }
  if (epoch_event.has("gpu_util_pct") && epoch_event.at("gpu_util_pct").is_number()) {
    has_gpu_ = true;
    const double s = std::max(num("epoch_s"), 1e-9);
    gpu_util_weighted_ += num("gpu_util_pct") * s;
    gpu_util_s_ += s;
    gpu_mem_peak_ = std::max(gpu_mem_peak_, num("gpu_mem_peak_bytes"));
  }
  if (epoch_event.has("loss_scale")) {
    has_loss_scale_ = true;
    skipped_steps_ += num("skipped_steps");
  }
  if (epoch_event.has("late_steps")) {
    has_late_ = true;
    late_steps_ += num("late_steps");
  }
}

Json RunTotals::summary(double wall_s) const {
  Json s = Json::object();
  auto last = [&](const char* key) { return last_.has(key) ? last_.at(key) : Json(); };
  s.set("event", "summary");
  s.set("test_acc", last("test_acc")).set("test_loss", last("test_loss"));
  s.set("train_loss", last("train_loss")).set("train_acc", last("train_acc"));
  s.set("samples_per_s", train_s_ > 0 ? Json(samples_ / train_s_) : Json());
  s.set("wall_s", wall_s).set("train_s", train_s_).set("epochs", epochs_).set("steps", last("step"));
  phases_.set_fields(s);
  s.set("bytes_sent", bytes_sent_).set("bytes_recv", bytes_recv_);
  s.set("fp32_bytes_sent", fp32_bytes_sent_).set("fp32_bytes_recv", fp32_bytes_recv_);
  s.set("shm_bytes_sent", shm_bytes_sent_).set("shm_bytes_recv", shm_bytes_recv_);
  double net_max = 0, shm_max = 0;
  for (const auto& [host, bytes] : host_bytes_) {
    net_max = std::max(net_max, bytes.first);
    shm_max = std::max(shm_max, bytes.second);
  }
  s.set("num_hosts", static_cast<double>(host_bytes_.size()));
  s.set("network_bytes_per_host_step", steps_ > 0 ? Json(net_max / steps_) : Json());
  s.set("shm_bytes_per_host_step", steps_ > 0 ? Json(shm_max / steps_) : Json());
  if (has_gpu_) s.set("gpu_util_pct", gpu_util_weighted_ / gpu_util_s_).set("gpu_mem_peak_bytes", gpu_mem_peak_);
  if (has_loss_scale_) s.set("loss_scale", last("loss_scale")).set("skipped_steps", skipped_steps_);
  if (has_late_) s.set("late_steps", late_steps_);
  if (last_.has("figures")) s.set("figures", last("figures"));  // as test_acc: the last epoch's
  return s;
}

}  // namespace pshard
