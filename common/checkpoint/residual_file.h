// A worker's error-feedback state at a checkpoint (RUN_DIR/checkpoints/worker-R.step-K.residuals): for each slice it
// encodes with a lossy codec, what the pushes up to step K left unsent and the codec's own state (randomk's sampler),
// so that a resumed compressed run continues where the uninterrupted one would.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pshard {

struct ResidualSlice {
  uint32_t slice = 0;           // global slice id in the layout
  std::vector<float> residual;  // the slice's length
  std::string codec_state;      // Codec::save_state() (empty for stateless codecs)
};

struct WorkerResiduals {
  uint32_t rank = 0;                  // the worker's rank
  int64_t step = 0;                   // the checkpoint's step: the state after the pushes of steps 0 .. step - 1
  uint64_t layout_fingerprint = 0;    // SliceLayout::fingerprint() of the job
  std::vector<ResidualSlice> slices;  // in slice order
};

// "DIR/worker-3.step-00000040.residuals"
std::string residual_file_path(const std::string& checkpoint_dir, uint32_t rank, int64_t step);

// Written atomically (binary::write_file_atomically), with a CRC-32 of its bytes.
void write_residual_file(const std::string& path, const WorkerResiduals& r);
// Read and checked: an Error naming the file for a truncated, corrupt or foreign one (another format, a CRC that does
// not match).
WorkerResiduals read_residual_file(const std::string& path);

// Removes worker `rank`'s residual files in DIR older than the newest `keep` (0: keeps all), as servers prune their
// checkpoints (checkpoint.keep).
void prune_residual_files(const std::string& checkpoint_dir, uint32_t rank, int64_t keep);

}  // namespace pshard
