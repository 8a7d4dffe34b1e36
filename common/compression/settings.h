// A job's compression choices (cluster.compression, compression_ratio, error_feedback, compression_min_bytes,
// pull_precision), read once from the config.
#pragma once

#include <cstdint>

#include "common/compression/codec.h"

namespace pshard {
class Config;
}

namespace pshard::compression {

struct Settings {
  Encoding push = Encoding::NONE;  // pushed gradients (cluster.compression)
  Encoding pull = Encoding::NONE;  // pulled weights (cluster.pull_precision: fp32 = none, fp16, bf16)
  double ratio = 0.01;             // topk/randomk: fraction of each slice sent
  bool error_feedback = true;      // topk/randomk/onebit keep a residual on the worker
  uint64_t min_bytes = 4096;       // tensors smaller than this travel as float32 both ways

  // Whether a tensor of `bytes` bytes is encoded at all (pushes and pulls alike).
  bool applies_to(uint64_t bytes) const { return bytes >= min_bytes; }
  static Settings from_config(const Config& cfg);
};

}  // namespace pshard::compression
