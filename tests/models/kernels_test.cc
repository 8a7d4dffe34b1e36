// CPU kernels and layer forwards against hand-computed values and naive reference loops.
#include "models/cpu/kernels.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "common/error.h"
#include "models/cpu/cpu_backend.h"
#include "models/layers/avgpool2d.h"
#include "models/layers/batchnorm.h"
#include "models/layers/conv2d.h"
#include "models/layers/dropout.h"
#include "models/layers/linear.h"
#include "models/layers/maxpool2d.h"
#include "tests/models/gradcheck.h"

namespace pshard::models {
namespace {

using testing::random_vector;

TEST(LinearForward, HandComputed) {
  CpuBackend cpu(1);
  Linear fc(cpu, 2, 3);
  std::vector<float> w = {1, 2, 3, 4, 5, 6}, b = {0.5f, -1, 2}, dw(6), db(3);
  fc.bind_params({w.data(), b.data()}, {dw.data(), db.data()});
  std::vector<float> x = {1, -1, 2, 0}, y(6);
  fc.forward(Tensor::view(x.data(), {2, 2}), Tensor::view(y.data(), {2, 3}), false);
  EXPECT_EQ(y, (std::vector<float>{-0.5f, -2, 1, 2.5f, 5, 12}));
  // Backward with dy = 1: dW[o][i] = sum_n x[n][i], db = n, dx[n][i] = sum_o W[o][i].
  std::vector<float> dy(6, 1.0f), dx(4);
  Tensor dxt = Tensor::view(dx.data(), {2, 2});
  fc.backward(Tensor::view(x.data(), {2, 2}), Tensor::view(y.data(), {2, 3}), Tensor::view(dy.data(), {2, 3}), &dxt);
  EXPECT_EQ(dw, (std::vector<float>{3, -1, 3, -1, 3, -1}));
  EXPECT_EQ(db, (std::vector<float>{2, 2, 2}));
  EXPECT_EQ(dx, (std::vector<float>{9, 12, 9, 12}));
}

TEST(Conv2dForward, HandComputed) {
  CpuBackend cpu(1);
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w = {1, 2, 3, 4}, b = {1}, dw(4), db(1), y(4);
  Conv2d plain(cpu, {1, 3, 3}, 1, 2);
  plain.bind_params({w.data(), b.data()}, {dw.data(), db.data()});
  plain.forward(Tensor::view(x.data(), {1, 1, 3, 3}), Tensor::view(y.data(), {1, 1, 2, 2}), false);
  EXPECT_EQ(y, (std::vector<float>{38, 48, 68, 78}));
  // Padding 1, stride 2: windows start at (-1,-1), (-1,1), (1,-1), (1,1).
  Conv2d strided(cpu, {1, 3, 3}, 1, 2, 2, 1, false);
  strided.bind_params({w.data()}, {dw.data()});
  strided.forward(Tensor::view(x.data(), {1, 1, 3, 3}), Tensor::view(y.data(), {1, 1, 2, 2}), false);
  EXPECT_EQ(y, (std::vector<float>{4, 18, 36, 77}));
}

// Direct convolution, the definition.
std::vector<float> naive_conv(const ConvShape& s, const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>& b) {
  std::vector<float> y(s.n * s.c_out * s.h_out * s.w_out);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t co = 0; co < s.c_out; ++co)
      for (int64_t oh = 0; oh < s.h_out; ++oh)
        for (int64_t ow = 0; ow < s.w_out; ++ow) {
          double acc = b.empty() ? 0.0 : b[co];
          for (int64_t ci = 0; ci < s.c_in; ++ci)
            for (int64_t ki = 0; ki < s.kh; ++ki)
              for (int64_t kj = 0; kj < s.kw; ++kj) {
                int64_t ih = oh * s.stride - s.pad + ki, iw = ow * s.stride - s.pad + kj;
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                acc += static_cast<double>(x[((n * s.c_in + ci) * s.h + ih) * s.w + iw]) *
                       w[((co * s.c_in + ci) * s.kh + ki) * s.kw + kj];
              }
          y[((n * s.c_out + co) * s.h_out + oh) * s.w_out + ow] = static_cast<float>(acc);
        }
  return y;
}

TEST(Conv2dForward, MatchesDirectConvolution) {
  CpuBackend cpu(2);
  struct Case {
    int64_t n, c_in, h, w, c_out, k, stride, pad;
  };
  // One sample per GEMM (big maps), several (small maps), partial last chunks, strides and paddings.
  for (const Case& c : {Case{3, 1, 28, 28, 6, 5, 1, 0}, Case{13, 4, 8, 8, 5, 5, 1, 0}, Case{9, 3, 9, 7, 4, 3, 2, 1},
                        Case{70, 2, 4, 4, 3, 3, 1, 1}, Case{5, 3, 11, 11, 2, 4, 3, 2}}) {
    ConvShape s = ConvShape::make(c.n, c.c_in, c.h, c.w, c.c_out, c.k, c.stride, c.pad);
    std::vector<float> x = random_vector(c.n * c.c_in * c.h * c.w, 1),
                       w = random_vector(c.c_out * c.c_in * c.k * c.k, 2), b = random_vector(c.c_out, 3),
                       y(c.n * c.c_out * s.h_out * s.w_out);
    cpu.conv2d_forward(s, x.data(), w.data(), b.data(), y.data());
    std::vector<float> ref = naive_conv(s, x, w, b);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-4) << "case n=" << c.n << " i=" << i;
  }
}

TEST(Gemm, EveryTransposeAndSplitMatchesNaive) {
  CpuBackend cpu(2);
  // Large enough to be split over the threads: by columns (n >= m) and by rows (m > n).
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{40, 300, 50}, {300, 40, 50}, {7, 5, 3}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        std::vector<float> a = random_vector(m * k, 1), b = random_vector(k * n, 2), c = random_vector(m * n, 3);
        const int64_t lda = ta ? m : k, ldb = tb ? k : n;
        std::vector<float> ref = c;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double acc = 0;
            for (int64_t l = 0; l < k; ++l)
              acc += static_cast<double>(ta ? a[l * lda + i] : a[i * lda + l]) * (tb ? b[j * ldb + l] : b[l * ldb + j]);
            ref[i * n + j] = static_cast<float>(0.5 * acc + 2.0 * ref[i * n + j]);
          }
        cpu.gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f, c.data(), n);
        for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], ref[i], 1e-4) << m << "x" << n << " " << ta << tb;
      }
    }
  }
}

TEST(Im2col, Col2imIsItsAdjoint) {
  // <im2col(x), c> == <x, col2im(c)> for every geometry.
  for (int64_t stride : {1, 2}) {
    for (int64_t pad : {0, 1, 2}) {
      ConvShape s = ConvShape::make(1, 2, 6, 5, 1, 3, stride, pad);
      const int64_t rows = 2 * 9, p = s.h_out * s.w_out;
      std::vector<float> x = random_vector(60, 4), c = random_vector(rows * p, 5), col(rows * p), xt(60);
      cpu::im2col(x.data(), s, col.data(), p);
      cpu::col2im(c.data(), s, p, xt.data());
      double lhs = 0, rhs = 0;
      for (size_t i = 0; i < col.size(); ++i) lhs += static_cast<double>(col[i]) * c[i];
      for (size_t i = 0; i < x.size(); ++i) rhs += static_cast<double>(x[i]) * xt[i];
      EXPECT_NEAR(lhs, rhs, 1e-4) << "stride " << stride << " pad " << pad;
    }
  }
}

TEST(ConvShape, RejectsKernelsThatDoNotFit) {
  EXPECT_THROW(ConvShape::make(1, 1, 3, 3, 1, 5, 1, 0), Error);
  EXPECT_NO_THROW(ConvShape::make(1, 1, 3, 3, 1, 5, 1, 1));
  EXPECT_THROW(ConvShape::make(1, 0, 3, 3, 1, 1, 1, 0), Error);
  CpuBackend cpu(1);
  EXPECT_THROW(Conv2d(cpu, {3, 32}, 4, 3), Error);
}

TEST(MaxPoolForward, HandComputed) {
  CpuBackend cpu(1);
  std::vector<float> x = {1, 5, 2, 0, 3, 4, 8, 7, -1, -2, 6, 6, -3, -4, 6, 9}, y(4);
  MaxPool2d pool(cpu, {1, 4, 4}, 2, 2);
  pool.forward(Tensor::view(x.data(), {1, 1, 4, 4}), Tensor::view(y.data(), {1, 1, 2, 2}), false);
  EXPECT_EQ(y, (std::vector<float>{5, 8, -1, 9}));
  // Ties: the gradient goes to the first maximum of the window (6 at row 2, col 2).
  std::vector<float> dy = {1, 2, 3, 4}, dx(16);
  Tensor dxt = Tensor::view(dx.data(), {1, 1, 4, 4});
  pool.backward(Tensor::view(x.data(), {1, 1, 4, 4}), Tensor::view(y.data(), {1, 1, 2, 2}),
                Tensor::view(dy.data(), {1, 1, 2, 2}), &dxt);
  EXPECT_EQ(dx, (std::vector<float>{0, 1, 0, 0, 0, 0, 2, 0, 3, 0, 0, 0, 0, 0, 0, 4}));
  x[15] = 6;  // window {6, 6, 6, 6}: first one
  pool.forward(Tensor::view(x.data(), {1, 1, 4, 4}), Tensor::view(y.data(), {1, 1, 2, 2}), false);
  pool.backward(Tensor::view(x.data(), {1, 1, 4, 4}), Tensor::view(y.data(), {1, 1, 2, 2}),
                Tensor::view(dy.data(), {1, 1, 2, 2}), &dxt);
  EXPECT_EQ(dx[10], 4.0f);
  EXPECT_EQ(dx[15], 0.0f);
}

TEST(AvgPoolForward, HandComputed) {
  CpuBackend cpu(1);
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9}, y(4);
  AvgPool2d pool(cpu, {1, 3, 3}, 2, 1);
  pool.forward(Tensor::view(x.data(), {1, 1, 3, 3}), Tensor::view(y.data(), {1, 1, 2, 2}), false);
  EXPECT_EQ(y, (std::vector<float>{3, 4, 6, 7}));
}

TEST(BatchNormKernel, RunningStatisticsFollowPyTorch) {
  CpuBackend cpu(1);
  BatchNorm bn(cpu, {1}, /*momentum=*/0.1f);
  testing::BoundParams p(bn, 1);
  p.values[0] = {2.0f};  // gamma
  p.values[1] = {0.5f};  // beta
  std::vector<float> x = {1, 2, 3, 6}, y(4);
  bn.forward(Tensor::view(x.data(), {4, 1}), Tensor::view(y.data(), {4, 1}), true);
  // mean 3, biased var 3.5, unbiased 14/3.
  const float invstd = 1.0f / std::sqrt(3.5f + 1e-5f);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], 2.0f * (x[i] - 3.0f) * invstd + 0.5f, 1e-5);
  std::vector<BufferRef> buffers = bn.buffers();
  ASSERT_EQ(buffers.size(), 2u);
  EXPECT_EQ(buffers[0].name, "running_mean");
  EXPECT_NEAR(buffers[0].value[0], 0.3f, 1e-6);
  EXPECT_NEAR(buffers[1].value[0], 0.9f + 0.1f * 14.0f / 3.0f, 1e-6);
  // Evaluation uses the running statistics.
  bn.forward(Tensor::view(x.data(), {4, 1}), Tensor::view(y.data(), {4, 1}), false);
  const float rs = 1.0f / std::sqrt(buffers[1].value[0] + 1e-5f);
  EXPECT_NEAR(y[0], 2.0f * (1.0f - 0.3f) * rs + 0.5f, 1e-5);
}

TEST(DropoutKernel, DeterministicScaledAndAboutP) {
  CpuBackend cpu(2);
  const int64_t n = 100000;
  std::vector<float> x(n, 1.0f), y1(n), y2(n), m1(n), m2(n);
  cpu.dropout_forward(x.data(), y1.data(), m1.data(), n, 0.3f, 7, 0);
  cpu.dropout_forward(x.data(), y2.data(), m2.data(), n, 0.3f, 7, 0);
  EXPECT_EQ(y1, y2);
  int64_t dropped = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(y1[i] == 0.0f || std::fabs(y1[i] - 1.0f / 0.7f) < 1e-6f) << y1[i];
    dropped += y1[i] == 0.0f;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / n, 0.3, 0.01);
  cpu.dropout_forward(x.data(), y2.data(), m2.data(), n, 0.3f, 7, 1);
  EXPECT_NE(y1, y2);  // the next call draws another mask
  cpu.dropout_forward(x.data(), y2.data(), m2.data(), n, 0.3f, 8, 0);
  EXPECT_NE(y1, y2);  // another seed too

  Dropout drop(cpu, {4}, 0.5f);
  drop.reset_state(1);
  std::vector<float> a = {1, 2, 3, 4}, b(4);
  drop.forward(Tensor::view(a.data(), {1, 4}), Tensor::view(b.data(), {1, 4}), false);
  EXPECT_EQ(a, b);  // identity in evaluation
  EXPECT_THROW(Dropout(cpu, {4}, 1.0f), Error);
}

TEST(SoftmaxKernel, ValuesLossAndAccuracy) {
  std::vector<float> z = {0, 0, 0, 1, 2, 3}, p(6);
  std::vector<int32_t> labels = {1, 2};
  double loss = 0;
  int64_t correct = 0;
  cpu::softmax_xent_forward(z.data(), labels.data(), 2, 3, p.data(), &loss, &correct);
  EXPECT_NEAR(p[0], 1.0 / 3, 1e-6);
  const double s = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(p[5], std::exp(3.0) / s, 1e-6);
  EXPECT_NEAR(loss, std::log(3.0) + (std::log(s) - 3.0), 1e-6);
  EXPECT_EQ(correct, 1);  // sample 0 ties (argmax 0 != 1), sample 1 is right
  labels[1] = 3;
  EXPECT_THROW(cpu::softmax_xent_forward(z.data(), labels.data(), 2, 3, p.data(), &loss, &correct), Error);
}

TEST(ShortcutKernel, SubsamplesAndPadsChannels) {
  // x [1, 2, 3, 3] -> y [1, 4, 2, 2]: channels 1..2 hold x at even positions, 0 and 3 are zero.
  std::vector<float> x(18), y(16), dx(18, 0.0f);
  for (int i = 0; i < 18; ++i) x[i] = static_cast<float>(i + 1);
  cpu::shortcut_pad_forward(1, 2, 3, 3, 2, 4, 1, 1, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{0, 0, 0, 0, 1, 3, 7, 9, 10, 12, 16, 18, 0, 0, 0, 0}));
  std::vector<float> dy(16, 1.0f);
  cpu::shortcut_pad_backward(1, 2, 3, 3, 2, 4, 1, 1, dy.data(), dx.data());
  EXPECT_EQ(dx[0], 1.0f);
  EXPECT_EQ(dx[1], 0.0f);
  EXPECT_EQ(dx[17], 1.0f);
}

TEST(CpuBackend, ThreadsAndDescription) {
  // At most OMP_THREAD_LIMIT (1 in the TSan step): OpenMP would never run more, and oneDNN must not expect them.
  const int two = std::min(2, omp_get_thread_limit());
  CpuBackend cpu(2);
  EXPECT_EQ(cpu.threads(), two);
  EXPECT_NE(cpu.describe().find(std::to_string(two) + (two == 1 ? " thread)" : " threads)")), std::string::npos)
      << cpu.describe();
  CpuBackend all(0);
  EXPECT_GE(all.threads(), 1);
  EXPECT_LE(all.threads(), omp_get_thread_limit());
  EXPECT_THROW(CpuBackend(-1), Error);
}

}  // namespace
}  // namespace pshard::models
