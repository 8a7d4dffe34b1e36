// KvClient: a sync job's error-feedback residuals written at the servers' checkpoint steps and read on resume.
#include <filesystem>

#include "common/checkpoint/residual_file.h"
#include "common/util/atomic_max.h"
#include "common/util/log.h"
#include "worker/client/kv_client_impl.h"

namespace pshard {

void KvClient::Impl::write_residual_files() {
  if (opt.checkpoint_dir.empty() || !encoder.keeps_state()) return;
  encoder.set_states_sink([this](int64_t step, std::vector<ResidualSlice> slices) {
    WorkerResiduals r;
    r.rank = opt.rank;
    r.step = step + 1;  // the checkpoint of the state after step `step`
    r.layout_fingerprint = layout.fingerprint();
    r.slices = std::move(slices);
    try {
      write_residual_file(residual_file_path(opt.checkpoint_dir, opt.rank, r.step), r);
      prune_residual_files(opt.checkpoint_dir, opt.rank, opt.checkpoint_keep);
    } catch (const std::exception& e) {
      // The servers' checkpoint stands; a resume from it starts this worker's residuals at zero (and says so).
      PSHARD_LOG(kWarn) << "the error-feedback residuals of checkpoint step " << r.step
                        << " were not written: " << e.what();
    }
  });
}

// The servers checkpoint when step + 1 is a multiple of checkpoint.every_steps, or when a push asked for it (a
// requested checkpoint or the stop: this worker's or, for a host's leader, a member's).
void KvClient::Impl::keep_residuals_if_checkpointed(int64_t step) {
  if (opt.checkpoint_dir.empty() || !encoder.keeps_state()) return;
  int64_t none = -1;
  first_pushed.compare_exchange_strong(none, step, std::memory_order_acq_rel);
  const bool periodic = opt.checkpoint_every_steps > 0 && (step + 1) % opt.checkpoint_every_steps == 0;
  const bool asked =
      step == checkpoint_step.load() || step == stop_step.load() || (group() && step == group()->stop_step());
  if (periodic || asked) encoder.keep_states_after(step);
}

void KvClient::Impl::heard_checkpoint(int64_t boundary) {
  if (raise_atomic(checkpoint_heard, boundary) >= boundary) return;  // heard already (every weights reply says it)
  if (opt.checkpoint_dir.empty() || !encoder.keeps_state()) return;
  // A boundary from before this worker's first push (a rejoined or resumed worker hears the servers' last one) is
  // not this worker's to write.
  const int64_t first = first_pushed.load(std::memory_order_acquire);
  if (first < 0 || boundary - 1 < first) return;
  encoder.keep_current_states(boundary - 1);  // the worker that asked kept them as its encodes came
}

void KvClient::Impl::flush_residuals(int64_t stopped) noexcept {
  try {
    if (!opt.checkpoint_dir.empty() && stopped > 0) encoder.keep_current_states(stopped - 1);
    encoder.flush();
  } catch (const std::exception& e) {
    PSHARD_LOG(kWarn) << "the last error-feedback residuals were not written: " << e.what();
  }
}

std::string KvClient::restore_residuals(int64_t step) {
  Impl& m = *impl_;
  if (!m.encoder.keeps_state()) return "";
  const std::string path = residual_file_path(m.opt.checkpoint_dir, m.opt.rank, step);
  std::error_code ec;
  if (m.opt.checkpoint_dir.empty() || !std::filesystem::exists(path, ec)) {
    return "no " + path +
           ": this worker's error-feedback residuals start again at zero, so the resumed run is not "
           "bitwise the uninterrupted one";
  }
  const WorkerResiduals r = read_residual_file(path);
  if (r.rank != m.opt.rank || r.step != step || r.layout_fingerprint != m.layout.fingerprint()) {
    throw Error("residual file " + path + " is of worker " + std::to_string(r.rank) + ", step " +
                std::to_string(r.step) +
                (r.layout_fingerprint != m.layout.fingerprint() ? ", another model's layout" : "") +
                ": not this worker's state at step " + std::to_string(step));
  }
  for (const ResidualSlice& s : r.slices) {
    if (s.slice >= m.layout.slices().size() ||
        (!s.residual.empty() && s.residual.size() != m.layout.slice(s.slice).length)) {
      throw Error("residual file " + path + ": slice " + std::to_string(s.slice) + " does not fit the layout");
    }
  }
  m.encoder.restore(r.slices);
  return "";
}

}  // namespace pshard
