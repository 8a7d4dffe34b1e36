// The `start` event (see start_event.h).
#include "common/metrics/start_event.h"

#include "common/config/config.h"
#include "common/config/job_shape.h"

namespace pshard {

StartEvent StartEvent::from_config(const Config& cfg, const std::string& model, int64_t batch_size, uint32_t workers,
                                   int64_t steps_per_epoch) {
  StartEvent e;
  e.model = model;
  e.optimizer = cfg.get_string("optimizer.name");
  e.lr = cfg.get_double("optimizer.lr");
  e.batch_size = batch_size;
  e.global_batch = batch_size * workers;
  const JobShape job = JobShape::from_config(cfg);
  if (job.uneven_batches()) {  // train.worker_batch_sizes: `batch_size` is the reporting worker's
    e.global_batch = 0;
    for (int64_t b : job.worker_batches) e.global_batch += b;
  }
  e.mode = job.mode_name();
  e.epochs = cfg.get_int("train.epochs");
  e.steps_per_epoch = steps_per_epoch;
  return e;
}

Json StartEvent::to_json() const {
  Json j = Json::object()
               .set("event", "start")
               .set("model", model)
               .set("optimizer", optimizer)
               .set("lr", lr)
               .set("batch_size", batch_size)
               .set("global_batch", global_batch)
               .set("model_bytes", model_bytes)
               .set("mode", mode)
               .set("epochs", epochs)
               .set("steps_per_epoch", steps_per_epoch);
  if (start_step > 0) j.set("start_step", start_step);
  if (program) j.set("program", true);
  return j;
}

}  // namespace pshard
