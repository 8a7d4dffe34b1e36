// ResNet basic block: the forward and backward of its six (or eight) operations and the shortcut.
#include "models/layers/residual_block.h"

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

ResidualBlock::ResidualBlock(Backend& backend, const std::vector<int64_t>& in_shape, int64_t out_channels,
                             int64_t stride, Shortcut shortcut, std::shared_ptr<ResidualScratch> scratch,
                             std::string projection_name)
    : Layer(backend, in_shape, {}),
      stride_(stride),
      shortcut_(shortcut),
      projection_name_(std::move(projection_name)),
      scratch_(scratch ? std::move(scratch) : std::make_shared<ResidualScratch>()) {
  if (in_shape.size() != 3) {
    throw Error("ResidualBlock: input must be {C, H, W} per sample, got " + shape_to_string(in_shape));
  }
  if (out_channels < in_shape[0]) {
    throw Error("ResidualBlock: out_channels (" + std::to_string(out_channels) + ") < in_channels (" +
                std::to_string(in_shape[0]) + ")");
  }
  conv1_ = std::make_unique<Conv2d>(backend, in_shape, out_channels, 3, stride, 1, false);
  bn1_ = std::make_unique<BatchNorm>(backend, conv1_->output_shape());
  conv2_ = std::make_unique<Conv2d>(backend, conv1_->output_shape(), out_channels, 3, 1, 1, false);
  bn2_ = std::make_unique<BatchNorm>(backend, conv2_->output_shape());
  out_shape_ = conv2_->output_shape();
  identity_ = stride == 1 && out_channels == in_shape[0];
  if (!identity_ && shortcut == Shortcut::kProjection) {
    proj_conv_ = std::make_unique<Conv2d>(backend, in_shape, out_channels, 1, stride, 0, false);
    proj_bn_ = std::make_unique<BatchNorm>(backend, proj_conv_->output_shape());
  }
}

ResidualBlock::~ResidualBlock() = default;

std::vector<ResidualBlock::Part> ResidualBlock::parts() const {
  std::vector<Part> p = {{"conv1", conv1_.get()}, {"bn1", bn1_.get()}, {"conv2", conv2_.get()}, {"bn2", bn2_.get()}};
  if (proj_conv_) {
    p.push_back({projection_name_ + ".0", proj_conv_.get()});
    p.push_back({projection_name_ + ".1", proj_bn_.get()});
  }
  return p;
}

std::vector<ParamDecl> ResidualBlock::param_decls() const {
  std::vector<ParamDecl> all;
  for (const Part& part : parts()) {
    for (ParamDecl d : part.layer->param_decls()) {
      d.name = part.name + "." + d.name;
      all.push_back(std::move(d));
    }
  }
  return all;
}

void ResidualBlock::bind_params(const std::vector<float*>& values, const std::vector<float*>& grads) {
  size_t at = 0;
  for (const Part& part : parts()) {
    size_t count = part.layer->param_decls().size();
    part.layer->bind_params(std::vector<float*>(values.begin() + at, values.begin() + at + count),
                            std::vector<float*>(grads.begin() + at, grads.begin() + at + count));
    at += count;
  }
}

std::vector<BufferRef> ResidualBlock::buffers() {
  std::vector<BufferRef> all;
  for (const Part& part : parts()) {
    for (BufferRef b : part.layer->buffers()) {
      b.name = part.name + "." + b.name;
      all.push_back(std::move(b));
    }
  }
  return all;
}

void ResidualBlock::reset_state(uint64_t seed) {
  for (const Part& part : parts()) part.layer->reset_state(seed);
}

void ResidualBlock::forward(const Tensor& x, const Tensor& y, bool train) {
  const int64_t n = x.dim(0);
  const std::vector<int64_t> mid = with_batch(n, out_shape_);
  // The batch norms write where the next operation reads (r1, y) and ReLU and the shortcut add run in place there:
  // backward needs only the batch norms' inputs (a1, a2) and the ReLU outputs, not the batch norms' outputs.
  Tensor a1 = a1_.get(backend_, mid), r1 = r1_.get(backend_, mid), a2 = a2_.get(backend_, mid);
  conv1_->forward(x, a1, train);
  bn1_->forward(a1, r1, train);
  backend_.relu_forward(r1.data(), r1.data(), r1.numel());
  conv2_->forward(r1, a2, train);
  bn2_->forward(a2, y, train);
  const int64_t count = y.numel();
  if (identity_) {
    backend_.add(count, y.data(), x.data(), y.data());
  } else if (shortcut_ == Shortcut::kPad) {
    Tensor s = s_.get(backend_, mid);
    backend_.shortcut_pad_forward(n, in_shape_[0], in_shape_[1], in_shape_[2], stride_, out_shape_[0], x.data(),
                                  s.data());
    backend_.add(count, y.data(), s.data(), y.data());
  } else {
    Tensor sa = sa_.get(backend_, mid), s = s_.get(backend_, mid);
    proj_conv_->forward(x, sa, train);
    proj_bn_->forward(sa, s, train);
    backend_.add(count, y.data(), s.data(), y.data());
  }
  backend_.relu_forward(y.data(), y.data(), count);
}

void ResidualBlock::backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) {
  const int64_t n = x.dim(0);
  const std::vector<int64_t> mid = with_batch(n, out_shape_);
  Tensor a1 = a1_.get(backend_, mid), r1 = r1_.get(backend_, mid), a2 = a2_.get(backend_, mid);
  Tensor ds = scratch_->ds.get(backend_, mid), g1 = scratch_->g1.get(backend_, mid),
         g2 = scratch_->g2.get(backend_, mid);
  // BatchNorm::backward does not read its output (forward did not keep it): any tensor of its shape stands in.
  backend_.relu_backward(y.data(), dy.data(), ds.data(), ds.numel());   // d(sum)
  bn2_->backward(a2, a2, ds, &g1);                                      // d a2
  conv2_->backward(r1, a2, g1, &g2);                                    // d r1
  backend_.relu_backward(r1.data(), g2.data(), g1.data(), g1.numel());  // d (bn1 output)
  bn1_->backward(a1, a1, g1, &g2);                                      // d a1
  conv1_->backward(x, a1, g2, dx);                                      // dx from the main path
  if (identity_) {
    if (dx) backend_.axpy(dx->numel(), 1.0f, ds.data(), dx->data());
  } else if (shortcut_ == Shortcut::kPad) {
    if (dx) {
      backend_.shortcut_pad_backward(n, in_shape_[0], in_shape_[1], in_shape_[2], stride_, out_shape_[0], ds.data(),
                                     dx->data());
    }
  } else {
    Tensor sa = sa_.get(backend_, mid), s = s_.get(backend_, mid);
    proj_bn_->backward(sa, s, ds, &g1);  // d sa
    if (dx) {
      Tensor gx = scratch_->gx.get(backend_, x.shape());
      proj_conv_->backward(x, sa, g1, &gx);
      backend_.axpy(dx->numel(), 1.0f, gx.data(), dx->data());
    } else {
      proj_conv_->backward(x, sa, g1, nullptr);
    }
  }
}

}  // namespace pshard::models
