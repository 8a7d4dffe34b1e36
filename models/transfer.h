// Reusable page-locked host buffers for the asynchronous transfers of a Backend (gradient push / weight pull).
#pragma once

#include <cstddef>

#include "models/backend.h"

namespace pshard::models {

// Host memory from backend.allocate_host() (pinned on CUDA, plain aligned memory on the CPU), grown on demand and
// kept between steps so that a training step allocates nothing. Not thread-safe; one owner.
//
//   HostBuffer grads(backend);
//   float* host = grads.get(model.num_params_elems());
//   auto t = backend.begin_download(host, p.grad, p.numel * sizeof(float));
//   backend.wait_transfer(t, 30.0);
class HostBuffer {
 public:
  explicit HostBuffer(Backend& backend) : backend_(backend) {}
  ~HostBuffer();
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  // At least `floats` floats; reallocates (contents lost) only when the buffer is too small. Do not call while a
  // transfer into or out of the old buffer is in flight.
  float* get(size_t floats);
  size_t capacity() const { return floats_; }

 private:
  Backend& backend_;
  float* data_ = nullptr;
  size_t floats_ = 0;
};

}  // namespace pshard::models
