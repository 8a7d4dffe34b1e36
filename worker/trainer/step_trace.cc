// Spans of the traced steps of a trainer.
#include "worker/trainer/step_trace.h"

#include "common/metrics/phase_clock.h"
#include "common/metrics/trace.h"
#include "models/model.h"

namespace pshard::trainer {
namespace {

// Span names of the phases (WorkerPhase order) and the rows of the worker's timeline.
const char* const kPhaseNames[] = {"data", "forward", "backward", "comm_wait", "other"};
constexpr int kStepRow = 0, kPhaseRow = 1, kLayerRow = 2;

}  // namespace

StepTrace::StepTrace(Tracer* tracer, PhaseClock& clock, const models::Model& model)
    : tracer_(tracer), clock_(clock), model_(model) {
  if (!tracer_) return;
  clock_.trace_to(tracer_, kPhaseNames);
  Tracer::name_this_thread(tracer_, kPhaseRow, "training phases");
  tracer_->name_row(kLayerRow, "layers");
  tracer_->name_row(kStepRow, "steps");
  for (int l = 0; l < model_.num_layers(); ++l) {
    forward_names_.push_back(tracer_->name("forward " + model_.layer_name(l)).id);
    backward_names_.push_back(tracer_->name("backward " + model_.layer_name(l)).id);
  }
  step_name_ = tracer_->name("step").id;
}

void StepTrace::begin_step(int64_t step) {
  if (!tracer_ || (!traced_ && !tracer_->traces(step))) return;
  step_start_ = clock_.flush();  // the time before this step stays out of (or in) the trace
  traced_ = tracer_->traces(step);
  clock_.set_tracing(traced_);
  step_ = step;
  layer_start_ = step_start_;
}

void StepTrace::layer_start() {
  if (traced_) layer_start_ = Clock::now();
}

void StepTrace::layer_done(Pass pass, int layer) {
  if (!traced_ || layer < 0) return;
  const auto now = Clock::now();
  const std::vector<uint32_t>& names = pass == Pass::kForward ? forward_names_ : backward_names_;
  tracer_->span(TraceName{names.at(static_cast<size_t>(layer))}, "layer", layer_start_, now,
                TraceArgs().set("step", step_).set("layer", layer), kLayerRow);
  layer_start_ = now;
}

void StepTrace::end_step(int64_t step) {
  if (!traced_) return;
  tracer_->span(TraceName{step_name_}, "step", step_start_, Clock::now(), TraceArgs().set("step", step), kStepRow,
                step);
}

void StepTrace::end_epoch() {
  if (!tracer_) return;
  clock_.set_tracing(false);
  traced_ = false;
}

}  // namespace pshard::trainer
