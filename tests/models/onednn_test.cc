// The oneDNN kernels of the CPU backend against the reference kernels (OpenBLAS + im2col), op by op, on chosen and
// random shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "models/cpu/cpu_backend.h"
#include "tests/models/gradcheck.h"

namespace pshard::models {
namespace {

using testing::random_vector;

// |got - want| <= tol * (largest |want| of the tensor, at least 1): rounding of a different summation order, while
// a wrong index or a missing term is off by the size of the values themselves.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  float scale = 1.0f;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  const float tol = 1e-5f * scale;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      if (bad++ < 3) ADD_FAILURE() << what << "[" << i << "]: onednn " << got[i] << ", reference " << want[i];
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " differ by more than " << tol;
}

// The oneDNN backend keeps activations of a multiple of 16 channels in blocks (Backend::channel_block): its inputs
// go in, and its outputs come back, through regroup_channels, so that the comparison with the NCHW reference covers
// the layout training runs in.
std::vector<float> to_backend(Backend& b, int64_t n, int64_t c, int64_t hw, const std::vector<float>& nchw) {
  std::vector<float> out(nchw.size());
  b.regroup_channels(n, c, hw, 1, b.channel_block(c), nchw.data(), out.data());
  return out;
}
std::vector<float> from_backend(Backend& b, int64_t n, int64_t c, int64_t hw, const std::vector<float>& v) {
  std::vector<float> out(v.size());
  b.regroup_channels(n, c, hw, b.channel_block(c), 1, v.data(), out.data());
  return out;
}

std::string name_of(const ConvShape& s, bool bias) {
  return "conv n" + std::to_string(s.n) + " c" + std::to_string(s.c_in) + " " + std::to_string(s.h) + "x" +
         std::to_string(s.w) + " -> " + std::to_string(s.c_out) + " k" + std::to_string(s.kh) + " s" +
         std::to_string(s.stride) + " p" + std::to_string(s.pad) + (bias ? " bias" : "");
}

// Forward, backward-data, backward-weights and the bias gradient of one shape on both kernel sets.
void compare_conv(const ConvShape& s, bool bias, bool need_dx, int threads, uint32_t seed) {
  CpuBackend dnn(threads, CpuKernels::kOneDnn), ref(threads, CpuKernels::kReference);
  const size_t xn = s.n * s.c_in * s.h * s.w, wn = s.c_out * s.c_in * s.kh * s.kw,
               yn = s.n * s.c_out * s.h_out * s.w_out;
  const std::vector<float> x = random_vector(xn, seed), w = random_vector(wn, seed + 1),
                           b = random_vector(s.c_out, seed + 2), dy = random_vector(yn, seed + 3);
  const std::string what = name_of(s, bias) + " threads " + std::to_string(threads);
  const float* bp = bias ? b.data() : nullptr;

  const int64_t hw = s.h * s.w, hw_out = s.h_out * s.w_out;
  const std::vector<float> x_dnn = to_backend(dnn, s.n, s.c_in, hw, x),
                           dy_dnn = to_backend(dnn, s.n, s.c_out, hw_out, dy);
  std::vector<float> y_dnn(yn, 7.0f), y_ref(yn, -7.0f);
  dnn.conv2d_forward(s, x_dnn.data(), w.data(), bp, y_dnn.data());
  ref.conv2d_forward(s, x.data(), w.data(), bp, y_ref.data());
  expect_close(from_backend(dnn, s.n, s.c_out, hw_out, y_dnn), y_ref, what + " forward y");

  // Outputs start out different so that a value one side leaves unwritten shows.
  std::vector<float> dx_dnn(xn, 3.0f), dx_ref(xn, -3.0f), dw_dnn(wn, 3.0f), dw_ref(wn, -3.0f), db_dnn(s.c_out, 3.0f),
      db_ref(s.c_out, -3.0f);
  dnn.conv2d_backward(s, x_dnn.data(), w.data(), dy_dnn.data(), need_dx ? dx_dnn.data() : nullptr, dw_dnn.data(),
                      bias ? db_dnn.data() : nullptr);
  dx_dnn = from_backend(dnn, s.n, s.c_in, hw, dx_dnn);
  ref.conv2d_backward(s, x.data(), w.data(), dy.data(), need_dx ? dx_ref.data() : nullptr, dw_ref.data(),
                      bias ? db_ref.data() : nullptr);
  expect_close(dw_dnn, dw_ref, what + " backward dw");
  if (bias) expect_close(db_dnn, db_ref, what + " backward db");
  if (need_dx) {
    expect_close(dx_dnn, dx_ref, what + " backward dx");
  } else {
    EXPECT_TRUE(std::all_of(dx_dnn.begin(), dx_dnn.end(), [](float v) { return v == 3.0f; })) << what;
  }
}

TEST(OneDnnConv, MatchesReferenceOnChosenShapes) {
  struct Case {
    int64_t n, c_in, h, w, c_out, k, stride, pad;
  };
  // Batch 1, odd sizes, stride 2 with and without padding (the last row/column the floor drops), 1x1 and 5x5
  // kernels, and the ResNet-20 / LeNet shapes.
  const Case cases[] = {{1, 1, 5, 5, 1, 3, 1, 0},     {1, 3, 7, 6, 4, 3, 2, 1},     {2, 3, 6, 6, 5, 3, 2, 0},
                        {3, 5, 9, 7, 7, 1, 2, 0},     {2, 2, 11, 13, 3, 5, 1, 2},   {4, 16, 32, 32, 16, 3, 1, 1},
                        {2, 16, 32, 32, 32, 3, 2, 1}, {2, 32, 16, 16, 64, 1, 2, 0}, {5, 1, 28, 28, 20, 5, 1, 0},
                        {5, 20, 12, 12, 50, 5, 1, 0}, {1, 3, 3, 3, 2, 3, 3, 1}};
  uint32_t seed = 100;
  for (const Case& c : cases) {
    const ConvShape s = ConvShape::make(c.n, c.c_in, c.h, c.w, c.c_out, c.k, c.stride, c.pad);
    for (int threads : {1, 2}) {
      compare_conv(s, /*bias=*/true, /*need_dx=*/true, threads, seed);
      compare_conv(s, /*bias=*/false, /*need_dx=*/seed % 2 == 0, threads, seed + 10);
      seed += 20;
    }
  }
}

TEST(OneDnnConv, MatchesReferenceOnRandomShapes) {
  std::mt19937 rng(20261126);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int i = 0; i < 40; ++i) {
    const int64_t k = pick(1, 5), pad = pick(0, k / 2 + (k > 1 ? 1 : 0)), stride = pick(1, 3);
    const int64_t h = pick(std::max<int>(1, static_cast<int>(k - 2 * pad)), 17);
    const int64_t w = pick(std::max<int>(1, static_cast<int>(k - 2 * pad)), 17);
    const ConvShape s = ConvShape::make(pick(1, 6), pick(1, 9), h, w, pick(1, 12), k, stride, pad);
    compare_conv(s, pick(0, 1) == 1, pick(0, 3) != 0, pick(1, 2), 1000 + 4 * i);
  }
}

TEST(OneDnnKernels, RunToRunIdentical) {
  // Sync training must be bitwise reproducible: the same calls twice (also on a fresh backend) give the same bits.
  // Convolution backward-weights, batch norm and the weight-gradient GEMM all reduce over the batch across threads.
  const ConvShape s = ConvShape::make(16, 16, 16, 16, 32, 3, 2, 1);
  const std::vector<float> x = random_vector(16 * 16 * 256, 1), w = random_vector(32 * 16 * 9, 2),
                           dy = random_vector(16 * 32 * 64, 3), gamma = random_vector(16, 4);
  auto run = [&](CpuBackend& cpu) {
    std::vector<float> out(x.size()), dw(w.size()), db(32), y(x.size()), stats(4 * 16), g(2 * 16), gw(256 * 256),
        bn_dx(x.size());
    cpu.conv2d_backward(s, x.data(), w.data(), dy.data(), out.data(), dw.data(), db.data());
    cpu.batchnorm_forward_train(16, 16, 256, x.data(), gamma.data(), gamma.data(), 1e-5f, 0.1f, stats.data(),
                                stats.data() + 16, stats.data() + 32, stats.data() + 48, y.data());
    cpu.batchnorm_backward(16, 16, 256, x.data(), y.data(), gamma.data(), stats.data() + 32, stats.data() + 48,
                           bn_dx.data(), g.data(), g.data() + 16);
    cpu.gemm(true, false, 256, 256, 64, 1.0f, x.data(), 256, x.data() + 64 * 256, 256, 0.0f, gw.data(), 256);
    for (const std::vector<float>* v : {&dw, &db, &y, &stats, &g, &gw, &bn_dx})
      out.insert(out.end(), v->begin(), v->end());
    return out;
  };
  CpuBackend a(2, CpuKernels::kOneDnn), b(2, CpuKernels::kOneDnn);
  const std::vector<float> first = run(a);
  EXPECT_EQ(run(a), first);
  EXPECT_EQ(run(b), first);
}

// Training forward (output, saved statistics, running statistics), inference forward and backward of one shape.
void compare_batchnorm(int64_t n, int64_t c, int64_t hw, int threads, uint32_t seed) {
  CpuBackend dnn(threads, CpuKernels::kOneDnn), ref(threads, CpuKernels::kReference);
  const std::string what = "batch norm " + std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(hw) +
                           " threads " + std::to_string(threads);
  const size_t size = n * c * hw;
  // A per-channel offset and scale, so that mean and variance differ between channels.
  std::vector<float> x = random_vector(size, seed);
  for (size_t i = 0; i < size; ++i) x[i] = x[i] * (1.0f + (i / hw) % c) + 0.5f * static_cast<float>((i / hw) % c);
  const std::vector<float> gamma = random_vector(c, seed + 1, 0.5f, 1.5f), beta = random_vector(c, seed + 2),
                           dy = random_vector(size, seed + 3);
  const float eps = 1e-5f, momentum = 0.1f;
  struct Side {
    std::vector<float> y, mean, invstd, rmean, rvar, eval, dx, dgamma, dbeta;
  };
  auto run = [&](CpuBackend& cpu) {
    Side s{std::vector<float>(size),
           std::vector<float>(c),
           std::vector<float>(c),
           random_vector(c, seed + 4),
           random_vector(c, seed + 5, 0.5f, 2.0f),
           std::vector<float>(size),
           std::vector<float>(size),
           std::vector<float>(c),
           std::vector<float>(c)};
    const std::vector<float> xb = to_backend(cpu, n, c, hw, x), dyb = to_backend(cpu, n, c, hw, dy);
    cpu.batchnorm_forward_train(n, c, hw, xb.data(), gamma.data(), beta.data(), eps, momentum, s.rmean.data(),
                                s.rvar.data(), s.mean.data(), s.invstd.data(), s.y.data());
    cpu.batchnorm_forward_eval(n, c, hw, xb.data(), gamma.data(), beta.data(), eps, s.rmean.data(), s.rvar.data(),
                               s.eval.data());
    cpu.batchnorm_backward(n, c, hw, xb.data(), dyb.data(), gamma.data(), s.mean.data(), s.invstd.data(), s.dx.data(),
                           s.dgamma.data(), s.dbeta.data());
    for (std::vector<float>* v : {&s.y, &s.eval, &s.dx}) *v = from_backend(cpu, n, c, hw, *v);
    return s;
  };
  const Side a = run(dnn), b = run(ref);
  expect_close(a.y, b.y, what + " forward y");
  expect_close(a.mean, b.mean, what + " batch mean");
  expect_close(a.invstd, b.invstd, what + " batch 1/std");
  expect_close(a.rmean, b.rmean, what + " running mean");
  expect_close(a.rvar, b.rvar, what + " running variance");
  expect_close(a.eval, b.eval, what + " inference y");
  expect_close(a.dx, b.dx, what + " backward dx");
  expect_close(a.dgamma, b.dgamma, what + " backward dgamma");
  expect_close(a.dbeta, b.dbeta, what + " backward dbeta");
}

TEST(OneDnnBatchNorm, MatchesReference) {
  // BatchNorm1d (hw = 1), batch 1, odd sizes and the ResNet-20 shapes.
  const int64_t shapes[][3] = {{8, 5, 1}, {1, 3, 49}, {3, 7, 15}, {64, 16, 1024}, {5, 64, 64}, {2, 1, 1}};
  uint32_t seed = 500;
  for (const auto& s : shapes) {
    for (int threads : {1, 2}) compare_batchnorm(s[0], s[1], s[2], threads, seed += 10);
  }
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int i = 0; i < 20; ++i) compare_batchnorm(pick(1, 9), pick(1, 20), pick(1, 40), pick(1, 2), seed += 10);
}

// Max and average pooling, forward and backward, of one shape.
void compare_pool(const PoolShape& s, int threads, uint32_t seed) {
  CpuBackend dnn(threads, CpuKernels::kOneDnn), ref(threads, CpuKernels::kReference);
  const std::string what = "pool " + std::to_string(s.n) + "x" + std::to_string(s.c) + "x" + std::to_string(s.h) + "x" +
                           std::to_string(s.w) + " k" + std::to_string(s.k) + " s" + std::to_string(s.stride) + " p" +
                           std::to_string(s.pad) + " threads " + std::to_string(threads);
  const size_t xn = s.n * s.c * s.h * s.w, yn = s.n * s.c * s.h_out * s.w_out;
  // Distinct values: the maximum of every window is unique, so both sides must route dy to the same cell.
  const std::vector<float> x = testing::spaced_vector(xn, seed), dy = random_vector(yn, seed + 1);
  const int64_t hw = s.h * s.w, hw_out = s.h_out * s.w_out;
  const std::vector<float> x_dnn = to_backend(dnn, s.n, s.c, hw, x), dy_dnn = to_backend(dnn, s.n, s.c, hw_out, dy);
  for (bool max : {true, false}) {
    const std::string name = what + (max ? " max" : " avg");
    std::vector<float> y_dnn(yn, 5.0f), y_ref(yn, -5.0f), dx_dnn(xn, 5.0f), dx_ref(xn, -5.0f);
    if (max) {
      dnn.maxpool2d_forward(s, x_dnn.data(), y_dnn.data());
      ref.maxpool2d_forward(s, x.data(), y_ref.data());
      dnn.maxpool2d_backward(s, x_dnn.data(), y_dnn.data(), dy_dnn.data(), dx_dnn.data());
      ref.maxpool2d_backward(s, x.data(), y_ref.data(), dy.data(), dx_ref.data());
    } else {
      dnn.avgpool2d_forward(s, x_dnn.data(), y_dnn.data());
      ref.avgpool2d_forward(s, x.data(), y_ref.data());
      dnn.avgpool2d_backward(s, dy_dnn.data(), dx_dnn.data());
      ref.avgpool2d_backward(s, dy.data(), dx_ref.data());
    }
    expect_close(from_backend(dnn, s.n, s.c, hw_out, y_dnn), y_ref, name + " forward y");
    expect_close(from_backend(dnn, s.n, s.c, hw, dx_dnn), dx_ref, name + " backward dx");
  }
}

TEST(OneDnnPool, MatchesReference) {
  struct Case {
    int64_t n, c, h, w, k, stride, pad;
  };
  // LeNet's 2x2, odd sizes (the floor drops a row), overlapping padded windows, global pooling (ResNet-20), batch 1.
  const Case cases[] = {{4, 20, 24, 24, 2, 2, 0}, {2, 3, 7, 5, 2, 2, 0}, {3, 4, 9, 8, 3, 2, 1},
                        {5, 64, 8, 8, 8, 8, 0},   {1, 2, 6, 6, 3, 1, 1}, {1, 1, 5, 5, 4, 3, 2}};
  uint32_t seed = 900;
  for (const Case& c : cases) {
    for (int threads : {1, 2}) {
      compare_pool(PoolShape::make(c.n, c.c, c.h, c.w, c.k, c.stride, c.pad), threads, seed += 10);
    }
  }
  std::mt19937 rng(11);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int i = 0; i < 20; ++i) {
    const int64_t k = pick(1, 4), pad = pick(0, k / 2), h = pick(std::max<int>(1, k - 2 * pad), 13),
                  w = pick(std::max<int>(1, k - 2 * pad), 13);
    compare_pool(PoolShape::make(pick(1, 4), pick(1, 6), h, w, k, pick(1, 3), pad), pick(1, 2), seed += 10);
  }
}

TEST(OneDnnGemm, MatchesReference) {
  // Every transpose, leading dimensions wider than the matrices, alpha/beta, and the Linear layers' shapes.
  std::mt19937 rng(3);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  struct Case {
    int64_t m, n, k;
  };
  std::vector<Case> cases = {{64, 256, 784}, {256, 784, 64}, {64, 784, 256}, {1, 10, 128}, {10, 128, 1}, {7, 1, 5}};
  for (int i = 0; i < 20; ++i) cases.push_back({pick(1, 40), pick(1, 40), pick(1, 40)});
  uint32_t seed = 3000;
  for (const Case& c : cases) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const int64_t pad = pick(0, 3), lda = (ta ? c.m : c.k) + pad, ldb = (tb ? c.k : c.n) + pad, ldc = c.n + pad;
      const float alpha = pick(0, 1) ? 1.0f : 0.5f, beta = pick(0, 2) == 0 ? 0.0f : (pick(0, 1) ? 1.0f : -0.25f);
      const std::vector<float> a = random_vector((ta ? c.k : c.m) * lda, seed),
                               b = random_vector((tb ? c.n : c.k) * ldb, seed + 1);
      std::vector<float> c_dnn = random_vector(c.m * ldc, seed + 2), c_ref = c_dnn;
      CpuBackend dnn(pick(1, 2), CpuKernels::kOneDnn), ref(1, CpuKernels::kReference);
      dnn.gemm(ta, tb, c.m, c.n, c.k, alpha, a.data(), lda, b.data(), ldb, beta, c_dnn.data(), ldc);
      ref.gemm(ta, tb, c.m, c.n, c.k, alpha, a.data(), lda, b.data(), ldb, beta, c_ref.data(), ldc);
      // The padding columns of C are not part of the result: both must leave them alone.
      expect_close(c_dnn, c_ref,
                   "gemm " + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) + " ta " +
                       std::to_string(ta) + " tb " + std::to_string(tb) + " pad " + std::to_string(pad));
      seed += 3;
    }
  }
}

TEST(CpuKernelsName, ParsesAndNames) {
  EXPECT_EQ(cpu_kernels_from_name("onednn"), CpuKernels::kOneDnn);
  EXPECT_EQ(cpu_kernels_from_name("reference"), CpuKernels::kReference);
  EXPECT_STREQ(cpu_kernels_name(CpuKernels::kReference), "reference");
  try {
    cpu_kernels_from_name("mkl");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'mkl'"), std::string::npos) << e.what();
  }
  EXPECT_NE(CpuBackend(1, CpuKernels::kOneDnn).describe().find("oneDNN"), std::string::npos);
  EXPECT_NE(CpuBackend(1, CpuKernels::kReference).describe().find("reference"), std::string::npos);
}

}  // namespace
}  // namespace pshard::models
