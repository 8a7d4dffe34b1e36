// ErrorFeedback: encode the corrected gradient, keep what the encoding lost.
#include "common/compression/error_feedback.h"

namespace pshard::compression {

size_t ErrorFeedback::encode(Codec& codec, const float* grad, size_t n, uint8_t* out) {
  if (residual_.size() != n) residual_.assign(n, 0.0f);
  for (size_t i = 0; i < n; ++i) residual_[i] += grad[i];  // the corrected gradient g + r
  const size_t bytes = codec.encode(residual_.data(), n, out);
  decoded_.resize(n);
  codec.decode(out, bytes, n, decoded_.data());
  for (size_t i = 0; i < n; ++i) residual_[i] -= decoded_[i];
  return bytes;
}

}  // namespace pshard::compression
