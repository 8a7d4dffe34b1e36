// Numerical gradient checks (central differences) for every layer and loss: input and parameter gradients.
#include <gtest/gtest.h>

#include "models/cpu/cpu_backend.h"
#include "models/layers/avgpool2d.h"
#include "models/layers/batchnorm.h"
#include "models/layers/bottleneck_block.h"
#include "models/layers/conv2d.h"
#include "models/layers/dropout.h"
#include "models/layers/flatten.h"
#include "models/layers/linear.h"
#include "models/layers/maxpool2d.h"
#include "models/layers/mse.h"
#include "models/layers/relu.h"
#include "models/layers/residual_block.h"
#include "models/layers/softmax_cross_entropy.h"
#include "tests/models/gradcheck.h"

namespace pshard::models {
namespace {

using testing::check_layer_gradients;
using testing::GradCheckOptions;
using testing::random_vector;
using testing::spaced_vector;

TEST(LayerGradient, Linear) {
  CpuBackend cpu(1);
  Linear fc(cpu, 5, 4);
  check_layer_gradients(fc, cpu, 3, random_vector(15, 1), {}, 11);
}

TEST(LayerGradient, LinearWithoutBias) {
  CpuBackend cpu(1);
  Linear fc(cpu, 3, 2, /*bias=*/false);
  EXPECT_EQ(fc.param_decls().size(), 1u);
  check_layer_gradients(fc, cpu, 4, random_vector(12, 2), {}, 12);
}

TEST(LayerGradient, Conv2dPlain) {
  CpuBackend cpu(1);
  Conv2d conv(cpu, {2, 5, 5}, 3, 3);
  check_layer_gradients(conv, cpu, 2, random_vector(2 * 2 * 25, 3), {}, 13);
}

TEST(LayerGradient, Conv2dStrideAndPadding) {
  CpuBackend cpu(1);
  Conv2d conv(cpu, {3, 7, 6}, 4, 3, /*stride=*/2, /*padding=*/1);
  EXPECT_EQ(conv.output_shape(), (std::vector<int64_t>{4, 4, 3}));
  check_layer_gradients(conv, cpu, 2, random_vector(2 * 3 * 42, 4), {}, 14);
}

TEST(LayerGradient, Conv2dManySamplesPerGemm) {
  // 3x3 outputs: many samples share one column matrix; 37 samples leave a partial last chunk.
  CpuBackend cpu(2);
  Conv2d conv(cpu, {2, 5, 5}, 3, 3, 1, 0);
  GradCheckOptions o;
  check_layer_gradients(conv, cpu, 37, random_vector(37 * 50, 5), o, 15);
}

TEST(LayerGradient, Conv2dStrideWithoutBias) {
  CpuBackend cpu(1);
  Conv2d conv(cpu, {2, 6, 6}, 2, 2, /*stride=*/3, /*padding=*/2, /*bias=*/false);
  check_layer_gradients(conv, cpu, 2, random_vector(2 * 72, 6), {}, 16);
}

TEST(LayerGradient, ReLU) {
  CpuBackend cpu(1);
  ReLU relu(cpu, {4, 3});
  check_layer_gradients(relu, cpu, 2, spaced_vector(24, 7), {}, 17);
}

TEST(LayerGradient, MaxPool2d) {
  CpuBackend cpu(1);
  MaxPool2d pool(cpu, {2, 4, 6}, 2, 2);
  check_layer_gradients(pool, cpu, 2, spaced_vector(2 * 48, 8), {}, 18);
}

TEST(LayerGradient, MaxPool2dOverlappingPadded) {
  CpuBackend cpu(1);
  MaxPool2d pool(cpu, {2, 5, 5}, 3, 2, 1);
  EXPECT_EQ(pool.output_shape(), (std::vector<int64_t>{2, 3, 3}));
  check_layer_gradients(pool, cpu, 2, spaced_vector(100, 9), {}, 19);
}

TEST(LayerGradient, AvgPool2d) {
  CpuBackend cpu(1);
  AvgPool2d pool(cpu, {3, 4, 4}, 2, 2);
  check_layer_gradients(pool, cpu, 2, random_vector(96, 10), {}, 20);
}

TEST(LayerGradient, AvgPool2dPaddedAndGlobal) {
  CpuBackend cpu(1);
  AvgPool2d padded(cpu, {2, 5, 5}, 3, 2, 1);
  check_layer_gradients(padded, cpu, 2, random_vector(100, 11), {}, 21);
  AvgPool2d global(cpu, {4, 3, 3}, 3, 3);
  EXPECT_EQ(global.output_shape(), (std::vector<int64_t>{4, 1, 1}));
  check_layer_gradients(global, cpu, 3, random_vector(108, 12), {}, 22);
}

TEST(LayerGradient, BatchNorm2dTrain) {
  CpuBackend cpu(1);
  BatchNorm bn(cpu, {3, 3, 3});
  check_layer_gradients(bn, cpu, 4, random_vector(4 * 27, 13, -2.0f, 2.0f), {}, 23);
}

TEST(LayerGradient, BatchNorm1dTrain) {
  CpuBackend cpu(1);
  BatchNorm bn(cpu, {5});
  check_layer_gradients(bn, cpu, 8, random_vector(40, 14, -2.0f, 2.0f), {}, 24);
}

TEST(LayerGradient, BatchNormEval) {
  CpuBackend cpu(1);
  BatchNorm bn(cpu, {2, 2, 2});
  // Evaluation is affine: y = gamma * (x - rm) / sqrt(rv + eps) + beta with rm = 0, rv = 1 after reset.
  testing::BoundParams p(bn, 25);
  std::vector<float> x = random_vector(16, 15), y(16);
  bn.forward(Tensor::view(x.data(), {2, 2, 2, 2}), Tensor::view(y.data(), {2, 2, 2, 2}), false);
  for (int i = 0; i < 16; ++i) {
    const int c = (i / 4) % 2;
    EXPECT_NEAR(y[i], p.values[0][c] * x[i] / std::sqrt(1.0f + 1e-5f) + p.values[1][c], 1e-5) << i;
  }
}

TEST(LayerGradient, Dropout) {
  CpuBackend cpu(1);
  Dropout drop(cpu, {10}, 0.4f);
  drop.reset_state(99);
  // Every forward of the check replays the same mask.
  check_layer_gradients(drop, cpu, 3, random_vector(30, 16), {}, 26, [&] { drop.set_counter(5); });
}

TEST(LayerGradient, Flatten) {
  CpuBackend cpu(1);
  Flatten flat(cpu, {2, 2, 3});
  EXPECT_TRUE(flat.is_view());
  check_layer_gradients(flat, cpu, 2, random_vector(24, 17), {}, 27);
}

TEST(LayerGradient, ResidualBlockIdentity) {
  CpuBackend cpu(1);
  ResidualBlock block(cpu, {3, 4, 4}, 3, 1, Shortcut::kPad);
  GradCheckOptions o;
  o.rtol = 3e-2;
  check_layer_gradients(block, cpu, 3, random_vector(3 * 48, 18, -2.0f, 2.0f), o, 28);
}

TEST(LayerGradient, ResidualBlockSixteenChannels) {
  // Channels a multiple of oneDNN's block of 16 (as in ResNet-20): the convolutions and batch norms run in the
  // blocked layout without padding (with 3 or 4 channels the block is padded). Activations NCHW, reordered around each
  // primitive: the check's random projection of the output is over NCHW elements (blocked_layout_test shows the
  // blocked layout computes the same bits).
  CpuBackend cpu(1, CpuKernels::kOneDnn, /*block_channels=*/false);
  ResidualBlock block(cpu, {16, 3, 3}, 16, 1, Shortcut::kPad);
  GradCheckOptions o;
  o.rtol = 3e-2;
  check_layer_gradients(block, cpu, 2, random_vector(2 * 144, 21, -2.0f, 2.0f), o, 31);
}

TEST(LayerGradient, ResidualBlockPadShortcut) {
  CpuBackend cpu(1);
  ResidualBlock block(cpu, {2, 5, 5}, 4, 2, Shortcut::kPad);
  EXPECT_EQ(block.output_shape(), (std::vector<int64_t>{4, 3, 3}));
  GradCheckOptions o;
  o.rtol = 3e-2;
  check_layer_gradients(block, cpu, 3, random_vector(3 * 50, 19, -2.0f, 2.0f), o, 29);
}

TEST(LayerGradient, ResidualBlockProjectionShortcut) {
  CpuBackend cpu(1);
  ResidualBlock block(cpu, {2, 4, 4}, 4, 2, Shortcut::kProjection);
  EXPECT_EQ(block.param_decls().size(), 9u);
  GradCheckOptions o;
  o.rtol = 3e-2;
  check_layer_gradients(block, cpu, 3, random_vector(3 * 32, 20, -2.0f, 2.0f), o, 30);
}

TEST(LayerGradient, BottleneckBlockIdentity) {
  CpuBackend cpu(1);
  BottleneckBlock block(cpu, {8, 4, 4}, 2, 1);  // 8 = 4 x 2 channels in and out: identity shortcut
  EXPECT_EQ(block.output_shape(), (std::vector<int64_t>{8, 4, 4}));
  EXPECT_EQ(block.param_decls().size(), 9u);
  GradCheckOptions o;
  o.rtol = 3e-2;
  o.step = 5e-3f;  // batch norms over 2 channels curve fast: a smaller step crosses fewer ReLU kinks
  check_layer_gradients(block, cpu, 3, random_vector(3 * 128, 22, -2.0f, 2.0f), o, 32);
}

TEST(LayerGradient, BottleneckBlockProjectionShortcut) {
  CpuBackend cpu(1);
  BottleneckBlock block(cpu, {3, 5, 5}, 2, 2);  // stride 2 on the 3x3 convolution and on the projection
  EXPECT_EQ(block.output_shape(), (std::vector<int64_t>{8, 3, 3}));
  EXPECT_EQ(block.param_decls().size(), 12u);
  EXPECT_EQ(block.param_decls()[9].name, "downsample.0.weight");
  GradCheckOptions o;
  o.rtol = 3e-2;
  check_layer_gradients(block, cpu, 3, random_vector(3 * 75, 23, -2.0f, 2.0f), o, 33);
}

// Losses: d(mean loss)/d output against central differences of loss_sum / n, computed in double.
TEST(LossGradient, SoftmaxCrossEntropy) {
  CpuBackend cpu(1);
  SoftmaxCrossEntropy loss(cpu);
  const int64_t n = 4, k = 5;
  std::vector<float> z = random_vector(n * k, 31, -3.0f, 3.0f), dz(n * k);
  std::vector<int32_t> labels = {0, 4, 2, 2};
  double sum = 0;
  int64_t correct = 0;
  Tensor zt = Tensor::view(z.data(), {n, k});
  loss.forward(zt, labels.data(), nullptr, &sum, &correct);
  loss.backward(zt, labels.data(), nullptr, Tensor::view(dz.data(), {n, k}));
  const float step = 1e-2f;
  for (int64_t i = 0; i < n * k; ++i) {
    const float keep = z[i];
    double up, down;
    z[i] = keep + step;
    loss.forward(zt, labels.data(), nullptr, &up, &correct);
    z[i] = keep - step;
    loss.forward(zt, labels.data(), nullptr, &down, &correct);
    z[i] = keep;
    EXPECT_NEAR(dz[i], (up - down) / (2.0 * step) / n, 1e-4) << i;
  }
}

TEST(LossGradient, MeanSquaredError) {
  CpuBackend cpu(1);
  MeanSquaredError loss(cpu);
  const int64_t n = 3, d = 2;
  std::vector<float> p = random_vector(n * d, 32), t = random_vector(n * d, 33), dp(n * d);
  double sum = 0;
  int64_t correct = -1;
  Tensor pt = Tensor::view(p.data(), {n, d});
  loss.forward(pt, nullptr, t.data(), &sum, &correct);
  EXPECT_EQ(correct, 0);
  loss.backward(pt, nullptr, t.data(), Tensor::view(dp.data(), {n, d}));
  const float step = 1e-2f;
  for (int64_t i = 0; i < n * d; ++i) {
    const float keep = p[i];
    double up, down;
    p[i] = keep + step;
    loss.forward(pt, nullptr, t.data(), &up, &correct);
    p[i] = keep - step;
    loss.forward(pt, nullptr, t.data(), &down, &correct);
    p[i] = keep;
    EXPECT_NEAR(dp[i], (up - down) / (2.0 * step) / n, 1e-5) << i;
  }
}

}  // namespace
}  // namespace pshard::models
