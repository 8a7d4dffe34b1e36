// The `start` event of docs/METRICS.md: what a distributed run trains, sent by worker 0 (a pshard worker or a
// program over the C API) before its first step.
#pragma once

#include <cstdint>
#include <string>

#include "common/util/json.h"

namespace pshard {

class Config;

// What the run trains and how long it is.
//
//   StartEvent start = StartEvent::from_config(cfg, "mlp", batch_size, world, steps_per_epoch);
//   start.model_bytes = model_bytes(model);
//   cluster.report(start.to_json());
struct StartEvent {
  std::string model;         // model.name, or what a C API caller named it
  std::string optimizer;     // optimizer.name
  double lr = 0;             // optimizer.lr (before any schedule)
  int64_t batch_size = 0;    // samples per step per worker
  int64_t global_batch = 0;  // of all workers
  uint64_t model_bytes = 0;  // bytes of all parameters (float32)
  std::string mode;          // cluster.mode
  int64_t epochs = 0;        // train.epochs
  int64_t steps_per_epoch = 0;
  int64_t start_step = 0;  // > 0: a resumed run, continued from this global step
  bool program = false;    // the workers are a program's (pshard.torch, the C API), which saves its own model

  // optimizer, lr, mode and epochs from the config; `model`, the batch (global: x workers) and the run's length as
  // given. model_bytes and start_step are the caller's.
  static StartEvent from_config(const Config& cfg, const std::string& model, int64_t batch_size, uint32_t workers,
                                int64_t steps_per_epoch);
  // {"event": "start", ...} in the field order of docs/METRICS.md; start_step only when > 0.
  Json to_json() const;
};

}  // namespace pshard
