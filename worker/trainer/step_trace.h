// The trainer's part of the timeline (trace.steps): for each traced step a `step N` span, the
// measured phases as they alternate (the PhaseClock emits them) and each layer's forward and
// backward, so that the training loop only marks where layers end.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace pshard {
class PhaseClock;
class Tracer;
}  // namespace pshard
namespace pshard::models {
class Model;
}

namespace pshard::trainer {

// Without a tracer every call is a null test.
//
//   StepTrace trace(tracer, clock, model);
//   trace.begin_step(step);
//   model.forward(..., [&](int l) {
//     trace.layer_done(StepTrace::Pass::kForward, l - 1);
//     sync.wait_layer(l);
//     trace.layer_start();
//   });
//   trace.layer_done(StepTrace::Pass::kForward, last);
//   ...
//   trace.end_step(step);
class StepTrace {
 public:
  StepTrace(Tracer* tracer, PhaseClock& clock, const models::Model& model);

  bool on() const { return traced_; }
  // Starts or stops tracing at the step boundary before `step`.
  void begin_step(int64_t step);
  // A layer's compute starts now (after its wait for weights, or after the previous layer).
  void layer_start();
  enum class Pass { kForward, kBackward };
  // `pass` of `layer` ended now; the next layer starts now. layer < 0: none.
  void layer_done(Pass pass, int layer);
  void end_step(int64_t step);
  // The epoch's training ended (evaluation follows): nothing more is traced until the next begin_step.
  void end_epoch();

 private:
  using Clock = std::chrono::steady_clock;
  Tracer* tracer_;
  PhaseClock& clock_;
  const models::Model& model_;
  std::vector<uint32_t> forward_names_, backward_names_;  // per layer: "forward L", "backward L" (TraceName)
  uint32_t step_name_ = 0;                                // "step"
  bool traced_ = false;
  int64_t step_ = 0;
  Clock::time_point step_start_, layer_start_;
};

}  // namespace pshard::trainer
