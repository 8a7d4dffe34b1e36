// Dot interaction (DLRM): the first vector, then the dot products of every pair of vectors.
#pragma once

#include "models/layer.h"

namespace pshard::models {

// Input [n, vectors * dim]: per sample the vectors z_0 .. z_{V-1} of dim values each (the bottom MLP's output, then
// one embedding row per field). Output [n, dim + V * (V - 1) / 2]: z_0, then z_i . z_j for every pair i < j in the
// order (0,1), (0,2), ..., (0,V-1), (1,2), ... No parameters; host-accessible backends only.
//
//   DotInteraction interact(backend, /*vectors=*/27, /*dim=*/16);  // output {16 + 351}
class DotInteraction final : public Layer {
 public:
  // vectors >= 2 and dim >= 1; an Error otherwise, and on a backend whose memory the host cannot read.
  DotInteraction(Backend& backend, int64_t vectors, int64_t dim);
  const char* type() const override { return "DotInteraction"; }
  void forward(const Tensor& x, const Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) override;

 private:
  int64_t vectors_, dim_;
};

}  // namespace pshard::models
