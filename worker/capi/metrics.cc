// The C API's metrics and timeline (pshard_c.h): step and epoch reports, trace spans.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/metrics/epoch_report.h"
#include "common/util/log.h"
#include "worker/capi/client.h"
#include "worker/capi/pshard_c.h"
#include "worker/trainer/trainer.h"

using namespace pshard::capi;  // the C API's own helpers (client.h)

extern "C" {

int pshard_traces(const pshard_client* c, int64_t step) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    return c->tracer && c->tracer->traces(step) ? 1 : 0;
  });
}

int pshard_trace_span(pshard_client* c, const char* name, const char* category, int64_t step, int64_t start_ns,
                      int64_t end_ns) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    require(name, "name");
    require(category, "category");
    if (end_ns < start_ns) {
      throw Failure{PSHARD_ERR_ARGUMENT, "pshard: a span ends (" + std::to_string(end_ns) + " ns) before it starts (" +
                                             std::to_string(start_ns) + " ns)"};
    }
    if (!c->tracer || !c->tracer->traces(step)) return PSHARD_OK;
    // std::chrono::steady_clock is CLOCK_MONOTONIC here (libstdc++), the clock the caller's timestamps are on.
    const Clock::time_point start{std::chrono::nanoseconds(start_ns)}, end{std::chrono::nanoseconds(end_ns)};
    // The tracer keeps a category pointer: one of a few fixed names, never the caller's string.
    static const char* const kCategories[] = {"step", "phase", "layer", "comm", "user"};
    const char* cat = "user";
    for (const char* k : kCategories) {
      if (std::strcmp(k, category) == 0) cat = k;
    }
    c->tracer->span(c->tracer->name(name), cat, start, end, pshard::TraceArgs().set("step", step));
    return PSHARD_OK;
  });
}

int pshard_report_step(pshard_client* c, int64_t epoch, int64_t step, double loss) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    if (!c->kv) throw Failure{PSHARD_ERR_STATE, "pshard: report a step after pshard_start"};
    if (epoch < 1 || step < 0) {
      throw Failure{PSHARD_ERR_ARGUMENT, "pshard: a step report needs epoch >= 1 and step >= 0, got epoch " +
                                             std::to_string(epoch) + ", step " + std::to_string(step)};
    }
    if (c->rank() != 0 || c->log_every == 0 || step % c->log_every != 0) return PSHARD_OK;
    pshard::trainer::StepEvent s;
    s.epoch = epoch;
    s.step = step;
    s.loss = loss;
    s.lr = c->worker->lr_at(step);
    s.wall_s = std::chrono::duration<double>(Clock::now() - c->connected_at).count();
    c->cluster->report(s.to_json());
    return PSHARD_OK;
  });
}

int pshard_report_figure(pshard_client* c, const char* name, double value) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    require(name, "name");
    const std::string n = name;
    std::string why;
    if (!pshard::valid_figure_name(n)) {
      why =
          "pshard: figure name '" + n.substr(0, 80) + "' is not 1-64 characters of [A-Za-z0-9_] starting with a letter";
    } else if (!c->next_figures.count(n) && c->next_figures.size() >= pshard::WorkerEpochReport::kMaxFigures) {
      why = "pshard: figure '" + n + "': an epoch report holds at most " +
            std::to_string(pshard::WorkerEpochReport::kMaxFigures) + " figures";
    }
    if (!why.empty()) {
      c->next_figures.clear();  // a report never holds half of a set of figures
      throw Failure{PSHARD_ERR_ARGUMENT, why};
    }
    c->next_figures[n] = value;
    return PSHARD_OK;
  });
}

int pshard_report_epoch(pshard_client* c, const pshard_epoch_report* report) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    require(report, "report");
    if (!c->kv) throw Failure{PSHARD_ERR_STATE, "pshard: report an epoch after pshard_start"};
    const bool elastic = c->cluster->map().elastic();
    const int64_t last = c->epochs_reported.load();
    if (report->epoch <= last || (elastic && report->epoch > c->epochs) || report->step < 0 || report->samples < 0) {
      throw Failure{PSHARD_ERR_ARGUMENT,
                    "pshard: an epoch report needs an epoch after this worker's last (" + std::to_string(last) + ")" +
                        (elastic ? " and at most train.epochs = " + std::to_string(c->epochs) : std::string()) +
                        ", step >= 0 and samples >= 0, got epoch " + std::to_string(report->epoch) + ", step " +
                        std::to_string(report->step) + ", samples " + std::to_string(report->samples)};
    }
    if (c->last_label && report->label <= *c->last_label) {
      throw Failure{PSHARD_ERR_ARGUMENT, "pshard: epoch " + std::to_string(report->label) + " reported after epoch " +
                                             std::to_string(*c->last_label) + ": a worker's epoch numbers increase"};
    }
    const uint32_t figures = report->figures;
    const bool train_acc = (figures & PSHARD_TRAIN_ACC) != 0, test_loss = (figures & PSHARD_TEST_LOSS) != 0,
               test_acc = (figures & PSHARD_TEST_ACC) != 0;
    const bool scaled = (figures & PSHARD_LOSS_SCALING) != 0;
    if (scaled && (!(report->loss_scale > 0.0) || !std::isfinite(report->loss_scale) || report->skipped_steps < 0)) {
      throw Failure{PSHARD_ERR_ARGUMENT, "pshard: epoch report " + std::to_string(report->epoch) + ": loss scale " +
                                             std::to_string(report->loss_scale) + " and " +
                                             std::to_string(report->skipped_steps) +
                                             " skipped steps (the scale must be positive and finite, the count >= 0)"};
    }
    if ((figures & ~(PSHARD_TRAIN_LOSS | PSHARD_TRAIN_ACC | PSHARD_TEST_LOSS | PSHARD_TEST_ACC | PSHARD_LOSS_SCALING |
                     PSHARD_LOSS_MEANS)) != 0 ||
        (train_acc && (report->correct < 0 || report->correct > report->samples)) ||
        ((test_loss || test_acc) && report->test_samples < 0) ||
        (test_acc && (report->test_correct < 0 || report->test_correct > report->test_samples))) {
      throw Failure{PSHARD_ERR_ARGUMENT,
                    "pshard: epoch report " + std::to_string(report->epoch) + ": figures " + std::to_string(figures) +
                        " with correct " + std::to_string(report->correct) + " of " + std::to_string(report->samples) +
                        " samples, test_correct " + std::to_string(report->test_correct) + " of " +
                        std::to_string(report->test_samples) +
                        " test samples (a measured count must be in 0..its samples; a test figure needs "
                        "test_samples >= 0)"};
    }
    pshard::WorkerEpochReport r;
    r.rank = c->rank();
    r.epoch = report->epoch;
    r.label = report->label;
    r.step = report->step;
    r.steps = std::max<int64_t>(report->step - (c->reported_step >= 0 ? c->reported_step : c->start_step()), 0);
    r.host = c->kv->host();
    r.samples = report->samples;
    r.has_train_loss = (figures & PSHARD_TRAIN_LOSS) != 0;
    r.loss_means = (figures & PSHARD_LOSS_MEANS) != 0;
    r.loss_sum = r.has_train_loss ? report->loss_sum : 0.0;
    r.has_train_acc = train_acc;
    r.correct = train_acc ? report->correct : 0;
    r.evaluated = report->test_samples >= 0;
    r.test_n = std::max<int64_t>(report->test_samples, 0);
    r.has_test_loss = test_loss;
    r.test_loss_sum = test_loss ? report->test_loss_sum : 0.0;
    r.has_test_acc = test_acc;
    r.test_correct = test_acc ? report->test_correct : 0;
    r.epoch_s = report->epoch_s;
    r.eval_s = report->eval_s;
    r.has_loss_scale = scaled;
    r.loss_scale = scaled ? report->loss_scale : 0.0;
    r.skipped_steps = scaled ? report->skipped_steps : 0;
    // The phases add up to epoch_s: what the caller measured, the library's waits, and the remainder as other.
    r.phases[pshard::WorkerPhase::kData] = std::max(report->data_s, 0.0);
    r.phases[pshard::WorkerPhase::kForward] = std::max(report->forward_s, 0.0);
    r.phases[pshard::WorkerPhase::kBackward] = std::max(report->backward_s, 0.0);
    {
      std::lock_guard<std::mutex> lock(c->wait_mu);
      r.phases[pshard::WorkerPhase::kCommWait] = c->wait_s;
      c->wait_s = 0;
    }
    r.phases[pshard::WorkerPhase::kOther] = std::max(report->epoch_s - r.phases.total(), 0.0);
    const pshard::KvTraffic now = c->kv->traffic(), before = c->reported_traffic;
    r.bytes_sent = now.bytes_sent - before.bytes_sent;
    r.bytes_recv = now.bytes_recv - before.bytes_recv;
    r.fp32_bytes_sent = now.fp32_bytes_sent - before.fp32_bytes_sent;
    r.fp32_bytes_recv = now.fp32_bytes_recv - before.fp32_bytes_recv;
    r.shm_bytes_sent = now.shm_bytes_sent - before.shm_bytes_sent;
    r.shm_bytes_recv = now.shm_bytes_recv - before.shm_bytes_recv;
    c->reported_traffic = now;
    c->reported_step = report->step;
    r.wall_s = std::chrono::duration<double>(Clock::now() - c->connected_at).count();
    r.lr = c->worker->lr_at(std::max<int64_t>(report->step - 1, 0));
    r.take_gpu_usage(c->gpu.get());
    r.figures = std::move(c->next_figures);
    c->next_figures.clear();
    pshard::Json j = r.to_json();
    j.set("event", "worker_epoch");
    c->cluster->report(j);
    raise_to(c->epochs_reported, report->epoch);
    c->last_label = report->label;
    // The declared length's last epoch: this worker pushed its last step, and its death from here on costs the job
    // nothing.
    if (c->epochs > 0 && report->epoch == c->epochs) {
      c->cluster->tell(pshard::ClusterClient::JobFact::kTrained);
    }
    return PSHARD_OK;
  });
}

}  // extern "C"
