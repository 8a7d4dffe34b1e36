// Error feedback for a lossy codec: what one push did not send is added to the next push of the same slice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/compression/codec.h"

namespace pshard::compression {

// The residual of one slice on one worker (Seide et al. 2014; Karimireddy et al. 2019): the encoder sends
// c = C(g + r) and keeps r' = g + r - D(c), so the sum of everything decoded over the steps equals the sum of the
// gradients minus the residual still held: nothing is lost, only delayed.
//
//   ErrorFeedback ef;
//   size_t bytes = ef.encode(codec, grad, n, out);  // out: codec.max_encoded_bytes(n) bytes
class ErrorFeedback {
 public:
  size_t encode(Codec& codec, const float* grad, size_t n, uint8_t* out);
  // What has not been sent yet (empty before the first encode).
  const std::vector<float>& residual() const { return residual_; }
  // A checkpoint's residual (a resumed run): the next encode adds it as its own.
  void set_residual(std::vector<float> residual) { residual_ = std::move(residual); }

 private:
  std::vector<float> residual_, decoded_;
};

}  // namespace pshard::compression
