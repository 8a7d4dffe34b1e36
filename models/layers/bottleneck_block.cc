// ResNet bottleneck block: the forward and backward of its nine (or eleven) operations and the shortcut.
#include "models/layers/bottleneck_block.h"

#include <utility>

#include "common/error.h"
#include "models/layers/batchnorm.h"
#include "models/layers/conv2d.h"

namespace pshard::models {
namespace {

std::vector<int64_t> with_batch(int64_t n, const std::vector<int64_t>& shape) {
  std::vector<int64_t> s = {n};
  s.insert(s.end(), shape.begin(), shape.end());
  return s;
}

}  // namespace

BottleneckBlock::BottleneckBlock(Backend& backend, const std::vector<int64_t>& in_shape, int64_t width, int64_t stride,
                                 std::shared_ptr<BottleneckScratch> scratch)
    : Layer(backend, in_shape, {}), scratch_(scratch ? std::move(scratch) : std::make_shared<BottleneckScratch>()) {
  if (in_shape.size() != 3) {
    throw Error("BottleneckBlock: input must be {C, H, W} per sample, got " + shape_to_string(in_shape));
  }
  if (width < 1 || stride < 1) {
    throw Error("BottleneckBlock: width and stride must be positive, got " + std::to_string(width) + " and " +
                std::to_string(stride));
  }
  conv1_ = std::make_unique<Conv2d>(backend, in_shape, width, 1, 1, 0, false);
  bn1_ = std::make_unique<BatchNorm>(backend, conv1_->output_shape());
  conv2_ = std::make_unique<Conv2d>(backend, conv1_->output_shape(), width, 3, stride, 1, false);
  bn2_ = std::make_unique<BatchNorm>(backend, conv2_->output_shape());
  conv3_ = std::make_unique<Conv2d>(backend, conv2_->output_shape(), width * kExpansion, 1, 1, 0, false);
  bn3_ = std::make_unique<BatchNorm>(backend, conv3_->output_shape());
  out_shape_ = conv3_->output_shape();
  if (stride != 1 || in_shape[0] != out_shape_[0]) {
    proj_conv_ = std::make_unique<Conv2d>(backend, in_shape, out_shape_[0], 1, stride, 0, false);
    proj_bn_ = std::make_unique<BatchNorm>(backend, proj_conv_->output_shape());
  }
}

BottleneckBlock::~BottleneckBlock() = default;

std::vector<BottleneckBlock::Part> BottleneckBlock::parts() const {
  std::vector<Part> p = {{"conv1", conv1_.get()}, {"bn1", bn1_.get()},     {"conv2", conv2_.get()},
                         {"bn2", bn2_.get()},     {"conv3", conv3_.get()}, {"bn3", bn3_.get()}};
  if (proj_conv_) {
    p.push_back({"downsample.0", proj_conv_.get()});
    p.push_back({"downsample.1", proj_bn_.get()});
  }
  return p;
}

std::vector<ParamDecl> BottleneckBlock::param_decls() const {
  std::vector<ParamDecl> all;
  for (const Part& part : parts()) {
    for (ParamDecl d : part.layer->param_decls()) {
      d.name = part.name + "." + d.name;
      all.push_back(std::move(d));
    }
  }
  return all;
}

void BottleneckBlock::bind_params(const std::vector<float*>& values, const std::vector<float*>& grads) {
  size_t at = 0;
  for (const Part& part : parts()) {
    size_t count = part.layer->param_decls().size();
    part.layer->bind_params(std::vector<float*>(values.begin() + at, values.begin() + at + count),
                            std::vector<float*>(grads.begin() + at, grads.begin() + at + count));
    at += count;
  }
}

std::vector<BufferRef> BottleneckBlock::buffers() {
  std::vector<BufferRef> all;
  for (const Part& part : parts()) {
    for (BufferRef b : part.layer->buffers()) {
      b.name = part.name + "." + b.name;
      all.push_back(std::move(b));
    }
  }
  return all;
}

void BottleneckBlock::reset_state(uint64_t seed) {
  for (const Part& part : parts()) part.layer->reset_state(seed);
}

void BottleneckBlock::forward(const Tensor& x, const Tensor& y, bool train) {
  const int64_t n = x.dim(0);
  const std::vector<int64_t> in = with_batch(n, conv1_->output_shape());
  const std::vector<int64_t> mid = with_batch(n, conv2_->output_shape());
  const std::vector<int64_t> out = with_batch(n, out_shape_);
  // As in ResidualBlock: each batch norm writes where the next operation reads, ReLU and the shortcut add run in
  // place there, and backward needs only the batch norms' inputs and the ReLU outputs.
  Tensor a1 = a1_.get(backend_, in), r1 = r1_.get(backend_, in);
  Tensor a2 = a2_.get(backend_, mid), r2 = r2_.get(backend_, mid), a3 = a3_.get(backend_, out);
  conv1_->forward(x, a1, train);
  bn1_->forward(a1, r1, train);
  backend_.relu_forward(r1.data(), r1.data(), r1.numel());
  conv2_->forward(r1, a2, train);
  bn2_->forward(a2, r2, train);
  backend_.relu_forward(r2.data(), r2.data(), r2.numel());
  conv3_->forward(r2, a3, train);
  bn3_->forward(a3, y, train);
  const int64_t count = y.numel();
  if (proj_conv_) {
    Tensor sa = sa_.get(backend_, out), s = s_.get(backend_, out);
    proj_conv_->forward(x, sa, train);
    proj_bn_->forward(sa, s, train);
    backend_.add(count, y.data(), s.data(), y.data());
  } else {
    backend_.add(count, y.data(), x.data(), y.data());
  }
  backend_.relu_forward(y.data(), y.data(), count);
}

void BottleneckBlock::backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) {
  const int64_t n = x.dim(0);
  const std::vector<int64_t> in = with_batch(n, conv1_->output_shape());
  const std::vector<int64_t> mid = with_batch(n, conv2_->output_shape());
  const std::vector<int64_t> out = with_batch(n, out_shape_);
  Tensor a1 = a1_.get(backend_, in), r1 = r1_.get(backend_, in);
  Tensor a2 = a2_.get(backend_, mid), r2 = r2_.get(backend_, mid), a3 = a3_.get(backend_, out);
  Tensor ds = scratch_->out_a.get(backend_, out), g3 = scratch_->out_b.get(backend_, out);
  Tensor m_a = scratch_->mid_a.get(backend_, mid), m_b = scratch_->mid_b.get(backend_, mid);
  Tensor i_a = scratch_->in_a.get(backend_, in), i_b = scratch_->in_b.get(backend_, in);
  // BatchNorm::backward does not read its output (forward did not keep it): any tensor of its shape stands in.
  backend_.relu_backward(y.data(), dy.data(), ds.data(), ds.numel());  // d(sum)
  bn3_->backward(a3, a3, ds, &g3);                                     // d a3
  conv3_->backward(r2, a3, g3, &m_a);                                  // d r2
  backend_.relu_backward(r2.data(), m_a.data(), m_b.data(), m_b.numel());
  bn2_->backward(a2, a2, m_b, &m_a);    // d a2
  conv2_->backward(r1, a2, m_a, &i_a);  // d r1
  backend_.relu_backward(r1.data(), i_a.data(), i_b.data(), i_b.numel());
  bn1_->backward(a1, a1, i_b, &i_a);  // d a1
  conv1_->backward(x, a1, i_a, dx);   // dx from the main path
  if (proj_conv_) {
    Tensor sa = sa_.get(backend_, out), s = s_.get(backend_, out);
    proj_bn_->backward(sa, s, ds, &g3);  // d sa
    if (dx) {
      Tensor gx = scratch_->gx.get(backend_, x.shape());
      proj_conv_->backward(x, sa, g3, &gx);
      backend_.axpy(dx->numel(), 1.0f, gx.data(), dx->data());
    } else {
      proj_conv_->backward(x, sa, g3, nullptr);
    }
  } else if (dx) {
    backend_.axpy(dx->numel(), 1.0f, ds.data(), dx->data());
  }
}

}  // namespace pshard::models
