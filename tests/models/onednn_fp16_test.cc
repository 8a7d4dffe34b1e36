// The CPU backend in fp16 (train.precision = fp16): oneDNN 2.6 has no fp16 convolution or matmul on CPU, so its
// float32 primitives read copies of their operands rounded to half precision. Checked three ways: bit for bit the
// float32 kernels on operands rounded beforehand (nothing else changes), within the error half's rounding allows of
// the float32 reference, and with half's range (an operand beyond 65504 is infinite).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/compression/fp16.h"
#include "common/error.h"
#include "models/cpu/cpu_backend.h"
#include "tests/models/gradcheck.h"

namespace pshard::models {
namespace {

using testing::random_vector;

// Half keeps 11 significant bits: rounding changes a value by at most u = 2^-11 of it, so a float32-accumulated sum
// of products of rounded operands is off by at most (2u + u^2) sum |a_i b_i| plus float32's own 1e-5 of the largest
// value. "Visible": above 2^-17 of the magnitude, where float32 alone stays near 1e-7.
constexpr double kUnit = 1.0 / 2048.0;
constexpr double kProductBound = 2 * kUnit + kUnit * kUnit;
constexpr double kVisible = 1.0 / 131072.0;

std::vector<float> rounded(std::vector<float> v) {
  compression::round_to_fp16(v.data(), v.size());
  return v;
}

std::vector<float> absolute(const std::vector<float>& v) {
  std::vector<float> a(v.size());
  for (size_t i = 0; i < v.size(); ++i) a[i] = std::fabs(v[i]);
  return a;
}

// Largest |got - want| / magnitude; every element must be within the fp16 bound.
double check_fp16(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& magnitude,
                  const std::string& what) {
  float scale = 1.0f;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  double largest = 0;
  size_t outside = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= kProductBound * magnitude[i] + 1e-5 * scale) && outside++ < 3) {
      ADD_FAILURE() << what << "[" << i << "]: fp16 " << got[i] << ", fp32 " << want[i];
    }
    if (magnitude[i] > 0) largest = std::max(largest, err / magnitude[i]);
  }
  EXPECT_EQ(outside, 0u) << what;
  return largest;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(OneDnnFp16, ConvolutionIsFloat32OnOperandsRoundedToHalf) {
  struct Case {
    int64_t n, c_in, h, w, c_out, k, stride, pad;
  };
  const Case cases[] = {{4, 1, 28, 28, 20, 5, 1, 0}, {2, 16, 16, 16, 32, 3, 2, 1}, {3, 5, 7, 9, 6, 3, 2, 1}};
  uint32_t seed = 300;
  for (const Case& c : cases) {
    const ConvShape s = ConvShape::make(c.n, c.c_in, c.h, c.w, c.c_out, c.k, c.stride, c.pad);
    // block_channels = false: NCHW, the caller's format (the rounded copy is made without a reorder); true: the
    // blocked nChw16c activations training runs on (rounded after the reorder).
    for (bool block : {false, true}) {
      const std::string what =
          "fp16 conv c" + std::to_string(c.c_in) + " -> " + std::to_string(c.c_out) + (block ? " blocked" : " nchw");
      CpuBackend fp16(2, CpuKernels::kOneDnn, block, Precision::kFp16), fp32(2, CpuKernels::kOneDnn, block),
          ref(2, CpuKernels::kReference, false);
      const size_t xn = s.n * s.c_in * s.h * s.w, wn = s.c_out * s.c_in * s.kh * s.kw,
                   yn = s.n * s.c_out * s.h_out * s.w_out;
      // Without block channels both backends take NCHW; with them, the same blocked layout (the same bits either
      // way, since rounding is elementwise).
      const std::vector<float> x = random_vector(xn, seed), w = random_vector(wn, seed + 1),
                               b = random_vector(s.c_out, seed + 2), dy = random_vector(yn, seed + 3);
      std::vector<float> y(yn), y32(yn), dx(xn), dw(wn), db(s.c_out), dx32(xn), dw32(wn), db32(s.c_out);
      fp16.conv2d_forward(s, x.data(), w.data(), b.data(), y.data());
      fp32.conv2d_forward(s, rounded(x).data(), rounded(w).data(), b.data(), y32.data());
      EXPECT_TRUE(same_bits(y, y32)) << what << " forward";
      fp16.conv2d_backward(s, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data());
      fp32.conv2d_backward(s, rounded(x).data(), rounded(w).data(), rounded(dy).data(), dx32.data(), dw32.data(),
                           db32.data());
      EXPECT_TRUE(same_bits(dx, dx32)) << what << " backward dx";
      EXPECT_TRUE(same_bits(dw, dw32)) << what << " backward dw";
      EXPECT_TRUE(same_bits(db, db32)) << what << " backward db";
      if (block) continue;
      // Against the float32 reference on the unrounded operands: within half's rounding, and visibly rounded.
      std::vector<float> y_ref(yn), y_mag(yn);
      ref.conv2d_forward(s, x.data(), w.data(), b.data(), y_ref.data());
      ref.conv2d_forward(s, absolute(x).data(), absolute(w).data(), nullptr, y_mag.data());
      EXPECT_GT(check_fp16(y, y_ref, y_mag, what + " forward"), kVisible) << what << ": no fp16 rounding visible";
    }
    seed += 10;
  }
}

TEST(OneDnnFp16, GemmIsFloat32OnOperandsRoundedToHalf) {
  // A Linear layer's forward (784 -> 256, batch 64) and an odd transposed case with alpha and beta.
  struct Case {
    bool ta, tb;
    int64_t m, n, k;
    float alpha, beta;
  };
  const Case cases[] = {{false, true, 64, 256, 784, 1.0f, 0.0f}, {true, true, 7, 13, 29, 0.5f, -0.25f}};
  uint32_t seed = 400;
  for (const Case& c : cases) {
    const int64_t lda = c.ta ? c.m : c.k, ldb = c.tb ? c.k : c.n, ldc = c.n;
    const std::vector<float> a = random_vector(c.m * c.k, seed), b = random_vector(c.k * c.n, seed + 1),
                             c0 = random_vector(c.m * c.n, seed + 2);
    CpuBackend fp16(2, CpuKernels::kOneDnn, false, Precision::kFp16), fp32(2, CpuKernels::kOneDnn, false),
        ref(2, CpuKernels::kReference, false);
    std::vector<float> got = c0, want = c0, exact = c0, mag(c.m * c.n);
    fp16.gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta, got.data(), ldc);
    fp32.gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, rounded(a).data(), lda, rounded(b).data(), ldb, c.beta, want.data(),
              ldc);
    EXPECT_TRUE(same_bits(got, want)) << "gemm " << c.m << "x" << c.n << "x" << c.k;
    ref.gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta, exact.data(), ldc);
    ref.gemm(c.ta, c.tb, c.m, c.n, c.k, std::fabs(c.alpha), absolute(a).data(), lda, absolute(b).data(), ldb, 0.0f,
             mag.data(), ldc);
    EXPECT_GT(check_fp16(got, exact, mag, "gemm"), kVisible) << "no fp16 rounding visible";
    seed += 3;
  }
}

// Half's range: an operand beyond 65504 is infinite, so its products are (what loss scaling detects); float32
// would have carried it. The caller's buffers are left as they were.
TEST(OneDnnFp16, AnOperandBeyondHalfsRangeIsInfinite) {
  const ConvShape s = ConvShape::make(1, 2, 4, 4, 3, 3, 1, 1);
  std::vector<float> x(2 * 16, 0.5f), w(3 * 2 * 9, 0.25f), y(3 * 16), dy(3 * 16, 1.0f), dx(x.size()), dw(w.size());
  dy[5] = 70000.0f;
  CpuBackend fp16(1, CpuKernels::kOneDnn, false, Precision::kFp16);
  fp16.conv2d_forward(s, x.data(), w.data(), nullptr, y.data());
  for (float v : y) EXPECT_TRUE(std::isfinite(v));
  fp16.conv2d_backward(s, x.data(), w.data(), dy.data(), dx.data(), dw.data(), nullptr);
  EXPECT_EQ(dy[5], 70000.0f);
  size_t infinite = 0;
  for (float v : dw) infinite += std::isinf(v) ? 1 : 0;
  EXPECT_GT(infinite, 0u) << "the weight gradient of an output gradient of 70000 should overflow half";
  x[0] = 1e5f;
  fp16.conv2d_forward(s, x.data(), w.data(), nullptr, y.data());
  EXPECT_TRUE(std::isinf(y[0])) << y[0];
}

TEST(OneDnnFp16, NeedsTheOneDnnKernels) {
  try {
    CpuBackend(1, CpuKernels::kReference, true, Precision::kFp16);
    FAIL() << "the reference kernels took fp16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.precision = fp16 needs train.cpu_kernels = onednn"), std::string::npos)
        << e.what();
  }
  EXPECT_NE(CpuBackend(1, CpuKernels::kOneDnn, true, Precision::kFp16).describe().find("fp16 compute"),
            std::string::npos);
}

}  // namespace
}  // namespace pshard::models
