// Float32 NCHW tensors: an owning buffer from a Backend, or a view of memory someone else owns.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pshard::models {

class Backend;

// Number of elements of a shape (1 for the empty shape); an Error on a negative dimension.
int64_t shape_numel(const std::vector<int64_t>& shape);
// "[64, 3, 32, 32]", for messages.
std::string shape_to_string(const std::vector<int64_t>& shape);

// A float32 tensor. Copies are shallow: an owning tensor shares its storage with its copies and views, and the
// memory lives as long as one of them does. The data is host memory on the CPU backend and device memory on CUDA.
//
//   Tensor x(backend, {64, 1, 28, 28});           // owning, uninitialised
//   Tensor flat = x.reshape({64, 784});            // view of the same floats
//   Tensor first = x.narrow(0, 8);                 // samples 0..7, a view
//   Tensor v = Tensor::view(host_ptr, {10});       // non-owning; host_ptr must outlive v
class Tensor {
 public:
  Tensor() = default;
  Tensor(Backend& backend, std::vector<int64_t> shape);
  static Tensor view(float* data, std::vector<int64_t> shape);

  // The same floats with another shape of the same numel (an Error otherwise).
  Tensor reshape(std::vector<int64_t> shape) const;
  // Rows [first, first + count) along dimension 0, as a view.
  Tensor narrow(int64_t first, int64_t count) const;

  float* data() const { return data_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const;
  int64_t numel() const { return numel_; }
  bool empty() const { return data_ == nullptr; }
  bool owning() const { return storage_ != nullptr; }

 private:
  std::shared_ptr<float> storage_;
  float* data_ = nullptr;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
};

// A buffer that is reused from step to step: get() returns a view of the requested shape and only allocates when
// the buffer is too small (the first step, or a larger batch). Layers keep their outputs and saved state in these,
// so a training step allocates nothing once the largest batch has been seen.
class ReusableBuffer {
 public:
  Tensor get(Backend& backend, const std::vector<int64_t>& shape);

 private:
  Tensor storage_;
};

}  // namespace pshard::models
