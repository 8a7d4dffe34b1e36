// The layer interface: forward and backward over a batch through a Backend, with declared parameters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/backend.h"
#include "models/tensor.h"

namespace pshard::models {

// A parameter a layer needs. The Model allocates all parameters of all layers in one block, binds them to the
// layers (bind_params) and initialises them from `init` / `scale`.
struct ParamDecl {
  enum class Init { kUniform, kNormal, kConstant };
  std::string name;            // "weight", "bias", "bn1.weight" (the model prefixes the layer name)
  std::vector<int64_t> shape;  // [out, in] for Linear, [c_out, c_in, k, k] for Conv2d
  Init init = Init::kUniform;  // U(-scale, scale) | N(0, scale^2) | the constant `scale`
  float scale = 0.0f;
};

// A non-trainable tensor a layer keeps (BatchNorm running statistics): saved with a model, never pushed to servers.
struct BufferRef {
  std::string name;  // "running_mean"
  std::vector<int64_t> shape;
  int64_t numel = 0;
  float* value = nullptr;  // backend memory (host-readable on the CPU backend)
};

// One layer. Shapes are per sample ({C, H, W} or {F}); tensors passed in are [n, shape...]. forward() writes y,
// which the caller allocated; backward() gets the x and y of the LAST forward(train=true) and the gradient dy of the
// loss with respect to y, OVERWRITES the gradients of the layer's parameters and, when dx is not null, writes dx.
//
//   Linear fc(backend, 784, 10);
//   fc.bind_params({w, b}, {dw, db});          // usually done by Model
//   fc.forward(x, y, /*train=*/true);
//   fc.backward(x, y, dy, &dx);
class Layer {
 public:
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  virtual const char* type() const = 0;  // "Linear", "Conv2d", ...
  const std::vector<int64_t>& input_shape() const { return in_shape_; }
  const std::vector<int64_t>& output_shape() const { return out_shape_; }

  virtual std::vector<ParamDecl> param_decls() const { return {}; }
  // One value and one gradient pointer per declared parameter, in declaration order.
  virtual void bind_params(const std::vector<float*>& values, const std::vector<float*>& grads) {
    (void)values;
    (void)grads;
  }
  virtual std::vector<BufferRef> buffers() { return {}; }
  // Resets non-trainable state: BatchNorm running statistics, the dropout stream (seeded with `seed`).
  virtual void reset_state(uint64_t seed) { (void)seed; }
  // True when the output is the input reshaped (Flatten): the Model passes views and calls neither method.
  virtual bool is_view() const { return false; }
  // True when the layer trains values that live outside the Model (Embedding rows on the servers): backward runs it.
  virtual bool trains_outside() const { return false; }

  virtual void forward(const Tensor& x, const Tensor& y, bool train) = 0;
  virtual void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) = 0;

 protected:
  Layer(Backend& backend, std::vector<int64_t> in_shape, std::vector<int64_t> out_shape)
      : backend_(backend), in_shape_(std::move(in_shape)), out_shape_(std::move(out_shape)) {}

  Backend& backend_;
  std::vector<int64_t> in_shape_, out_shape_;
};

// The loss at the end of a model: reads the model output and the labels (classification) or targets (regression),
// both in backend memory.
class Loss {
 public:
  virtual ~Loss() = default;
  virtual const char* type() const = 0;
  // loss_sum: sum over the n samples of the per-sample loss; correct: argmax hits (0 for regression).
  virtual void forward(const Tensor& out, const int32_t* labels, const float* targets, double* loss_sum,
                       int64_t* correct) = 0;
  // dout = d(MEAN loss over the batch) / d out, for the last forward.
  virtual void backward(const Tensor& out, const int32_t* labels, const float* targets, const Tensor& dout) = 0;
};

}  // namespace pshard::models
