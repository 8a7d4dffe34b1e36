// The CPU backend's blocked activations (Backend::channel_block: oneDNN's nChw16c for a multiple of 16 channels)
// against the same backend with every activation NCHW: the same primitives run in the same formats either way (the
// NCHW backend reorders around each one), so losses, gradients and trained weights must agree bit for bit, including
// at the model's edges (a 16-channel input, Flatten of blocked channels) and in the option-A shortcut.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "common/error.h"
#include "models/cpu/cpu_backend.h"
#include "models/cpu/kernels.h"
#include "models/layers/batchnorm.h"
#include "models/layers/conv2d.h"
#include "models/layers/flatten.h"
#include "models/layers/linear.h"
#include "models/layers/maxpool2d.h"
#include "models/layers/relu.h"
#include "models/layers/residual_block.h"
#include "models/layers/softmax_cross_entropy.h"
#include "models/model.h"
#include "tests/models/gradcheck.h"

namespace pshard::models {
namespace {

using testing::random_vector;

TEST(BlockedLayout, OnlyOneDnnBlocksMultiplesOfSixteen) {
  CpuBackend blocked(1), nchw(1, CpuKernels::kOneDnn, /*block_channels=*/false), ref(1, CpuKernels::kReference);
  EXPECT_EQ(blocked.channel_block(16), 16);
  EXPECT_EQ(blocked.channel_block(64), 16);
  EXPECT_EQ(blocked.channel_block(3), 1);
  EXPECT_EQ(blocked.channel_block(20), 1);
  EXPECT_EQ(nchw.channel_block(16), 1);
  EXPECT_EQ(ref.channel_block(16), 1);
}

TEST(BlockedLayout, RegroupPlacesEachElementAndRoundTrips) {
  CpuBackend cpu(1);
  const int64_t n = 2, c = 32, hw = 3;
  std::vector<float> x(n * c * hw), blocked(x.size(), -1.0f), back(x.size(), -1.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  cpu.regroup_channels(n, c, hw, 1, 16, x.data(), blocked.data());
  // Element (b, k, p) of NCHW at ((b * 2 + k / 16) * hw + p) * 16 + k % 16.
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t k = 0; k < c; ++k) {
      for (int64_t p = 0; p < hw; ++p) {
        ASSERT_EQ(blocked[((b * 2 + k / 16) * hw + p) * 16 + k % 16], x[(b * c + k) * hw + p]) << b << " " << k;
      }
    }
  }
  cpu.regroup_channels(n, c, hw, 16, 1, blocked.data(), back.data());
  EXPECT_EQ(back, x);
  // A layout the backend does not use is refused, naming it.
  try {
    cpu.regroup_channels(n, 20, hw, 1, 16, x.data(), blocked.data());
    FAIL() << "20 channels in blocks of 16 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("20 channels in blocks of 16"), std::string::npos) << e.what();
  }
}

TEST(BlockedLayout, ShortcutPadMatchesNchwInEveryCombination) {
  const int64_t n = 2, h = 5, w = 5, stride = 2, ho = 3, wo = 3;
  for (auto [c_in, c_out] : {std::pair<int64_t, int64_t>{16, 32}, {8, 16}, {16, 24}, {16, 16}}) {
    for (int64_t ib : {int64_t{1}, int64_t{16}}) {
      for (int64_t ob : {int64_t{1}, int64_t{16}}) {
        if (c_in % ib != 0 || c_out % ob != 0) continue;
        const std::vector<float> x = random_vector(n * c_in * h * w, 3), dy = random_vector(n * c_out * ho * wo, 4);
        std::vector<float> y_ref(dy.size()), dx_ref(x.size(), 0.5f);
        cpu::shortcut_pad_forward(n, c_in, h, w, stride, c_out, 1, 1, x.data(), y_ref.data());
        cpu::shortcut_pad_backward(n, c_in, h, w, stride, c_out, 1, 1, dy.data(), dx_ref.data());
        std::vector<float> xb(x.size()), dyb(dy.size()), yb(dy.size()), y(dy.size()), dxb(x.size()), dx(x.size());
        std::vector<float> half(x.size(), 0.5f);
        cpu::regroup_channels(n, c_in, h * w, 1, ib, x.data(), xb.data());
        cpu::regroup_channels(n, c_out, ho * wo, 1, ob, dy.data(), dyb.data());
        cpu::shortcut_pad_forward(n, c_in, h, w, stride, c_out, ib, ob, xb.data(), yb.data());
        cpu::regroup_channels(n, c_out, ho * wo, ob, 1, yb.data(), y.data());
        cpu::regroup_channels(n, c_in, h * w, 1, ib, half.data(), dxb.data());
        cpu::shortcut_pad_backward(n, c_in, h, w, stride, c_out, ib, ob, dyb.data(), dxb.data());
        cpu::regroup_channels(n, c_in, h * w, ib, 1, dxb.data(), dx.data());
        EXPECT_EQ(y, y_ref) << c_in << "->" << c_out << " blocks " << ib << "/" << ob;
        EXPECT_EQ(dx, dx_ref) << c_in << "->" << c_out << " blocks " << ib << "/" << ob;
      }
    }
  }
}

// A model with every edge of the layout: a 16-channel input, convolution with bias, batch norm, both shortcuts
// (option A changing 16 -> 32 channels with stride 2, identity, projection to 48), max and average pooling, and a
// Flatten of 48 blocked channels over 2x2 pixels into a Linear layer.
std::unique_ptr<Model> edge_model(Backend& b) {
  std::vector<Model::NamedLayer> layers;
  auto add = [&](const char* name, Layer* l) { layers.push_back({name, std::unique_ptr<Layer>(l)}); };
  add("conv", new Conv2d(b, {16, 8, 8}, 16, 3, 1, 1, /*bias=*/true));
  add("bn", new BatchNorm(b, {16, 8, 8}));
  add("relu", new ReLU(b, {16, 8, 8}));
  add("block1", new ResidualBlock(b, {16, 8, 8}, 32, 2, Shortcut::kPad));
  add("block2", new ResidualBlock(b, {32, 4, 4}, 32, 1, Shortcut::kPad));
  add("block3", new ResidualBlock(b, {32, 4, 4}, 48, 1, Shortcut::kProjection));
  add("pool", new MaxPool2d(b, {48, 4, 4}, 2, 2));
  add("flat", new Flatten(b, {48, 2, 2}));
  add("fc", new Linear(b, 192, 10));
  ModelSpec spec;
  spec.name = "edges";
  spec.input_shape = {16, 8, 8};
  spec.num_classes = 10;
  return std::make_unique<Model>(b, spec, std::move(layers), std::make_unique<SoftmaxCrossEntropy>(b));
}

// Three SGD steps and an evaluation forward on both backends: every loss, gradient and weight equal.
void expect_same_training(Model& blocked, Model& nchw, const std::vector<int64_t>& input, int64_t n) {
  int64_t numel = n;
  for (int64_t d : input) numel *= d;
  blocked.init_params(7);
  nchw.init_params(7);
  std::vector<int32_t> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<int32_t>(i % 10);
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> x = random_vector(numel, 40 + step, -2.0f, 2.0f);
    const StepResult a = blocked.forward(x.data(), n, labels.data(), nullptr, true);
    const StepResult b = nchw.forward(x.data(), n, labels.data(), nullptr, true);
    ASSERT_EQ(a.loss_sum, b.loss_sum) << "step " << step;
    blocked.backward();
    nchw.backward();
    for (size_t p = 0; p < blocked.params().size(); ++p) {
      const ParamRef &pa = blocked.params()[p], &pb = nchw.params()[p];
      ASSERT_EQ(0, std::memcmp(pa.grad, pb.grad, sizeof(float) * pa.numel)) << pa.name << " step " << step;
      for (int64_t i = 0; i < pa.numel; ++i) pa.value[i] -= 0.05f * pa.grad[i], pb.value[i] -= 0.05f * pb.grad[i];
    }
  }
  const std::vector<float> x = random_vector(numel, 50, -2.0f, 2.0f);
  EXPECT_EQ(blocked.forward(x.data(), n, labels.data(), nullptr, false).loss_sum,
            nchw.forward(x.data(), n, labels.data(), nullptr, false).loss_sum);
}

TEST(BlockedLayout, ModelEdgesTrainBitForBitAsNchw) {
  for (int threads : {1, 2}) {
    CpuBackend blocked(threads), nchw(threads, CpuKernels::kOneDnn, /*block_channels=*/false);
    auto a = edge_model(blocked), b = edge_model(nchw);
    EXPECT_FALSE(a->layer(7).is_view());  // Flatten regroups the blocked channels
    EXPECT_TRUE(b->layer(7).is_view());
    expect_same_training(*a, *b, {16, 8, 8}, 5);
  }
}

TEST(BlockedLayout, ResNet20TrainsBitForBitAsNchw) {
  CpuBackend blocked(2), nchw(2, CpuKernels::kOneDnn, /*block_channels=*/false);
  ModelSpec spec;
  spec.name = "resnet20";
  spec.input_shape = {3, 32, 32};
  spec.num_classes = 10;
  auto a = Model::create(spec, blocked), b = Model::create(spec, nchw);
  expect_same_training(*a, *b, {3, 32, 32}, 4);
}

}  // namespace
}  // namespace pshard::models
