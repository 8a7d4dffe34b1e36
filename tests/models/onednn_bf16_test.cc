// The CPU backend in bf16 (train.precision = bf16: convolutions and GEMMs read bfloat16 operands, accumulate and
// write float32) against the float32 reference kernels, within the error bfloat16's rounding allows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "models/cpu/cpu_backend.h"
#include "tests/models/gradcheck.h"

namespace pshard::models {
namespace {

using testing::random_vector;

// bfloat16 keeps 8 significant bits: rounding to nearest changes a value by at most u = 2^-8 of it. A product of two
// rounded operands is off by at most (2u + u^2) of |a b|, so a float32-accumulated sum of products is off by at most
// (2u + u^2) * sum |a_i b_i| (what the reference computes from the operands' absolute values, `magnitude`), plus
// float32's own rounding (1e-5 of the largest value). A wrong index or a missing term breaks this bound; a kernel
// that silently stayed in float32 is caught by the other check: bf16's error must show somewhere. Random roundings
// partly cancel in a sum (the error grows like sqrt(K) u, the bound like K u), so "shows" means above 2^-14 of the
// magnitude: float32 arithmetic stays near 1e-7 of it, bf16's operands lose 2^-9 of each on average.
constexpr double kUnit = 1.0 / 256.0;
constexpr double kProductBound = 2 * kUnit + kUnit * kUnit;
constexpr double kVisible = 1.0 / 16384.0;

struct Deviation {
  size_t outside = 0;    // elements beyond the bound
  double largest = 0.0;  // largest |got - want| / (magnitude + 1e-30): how much of the bound bf16 used
};

Deviation check_bf16(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& magnitude,
                     const std::string& what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  float scale = 1.0f;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  Deviation d;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double bound = kProductBound * magnitude[i] + 1e-5 * scale;
    if (!(err <= bound)) {
      if (d.outside++ < 3) {
        ADD_FAILURE() << what << "[" << i << "]: bf16 " << got[i] << ", fp32 " << want[i] << ", bound " << bound;
      }
    }
    if (magnitude[i] > 0) d.largest = std::max(d.largest, err / magnitude[i]);
  }
  EXPECT_EQ(d.outside, 0u) << what << ": " << d.outside << " of " << got.size() << " outside the bf16 bound";
  return d;
}

std::vector<float> absolute(const std::vector<float>& v) {
  std::vector<float> a(v.size());
  for (size_t i = 0; i < v.size(); ++i) a[i] = std::fabs(v[i]);
  return a;
}

// NCHW in and out (block_channels = false): the comparison is of arithmetic, not layout (onednn_test covers that).
void compare_conv_bf16(const ConvShape& s, bool bias, uint32_t seed) {
  CpuBackend bf16(2, CpuKernels::kOneDnn, /*block_channels=*/false, Precision::kBf16), ref(2, CpuKernels::kReference);
  const size_t xn = s.n * s.c_in * s.h * s.w, wn = s.c_out * s.c_in * s.kh * s.kw,
               yn = s.n * s.c_out * s.h_out * s.w_out;
  const std::vector<float> x = random_vector(xn, seed), w = random_vector(wn, seed + 1),
                           b = random_vector(s.c_out, seed + 2), dy = random_vector(yn, seed + 3);
  const std::vector<float> ax = absolute(x), aw = absolute(w), ady = absolute(dy);
  const std::string what = "bf16 conv n" + std::to_string(s.n) + " c" + std::to_string(s.c_in) + " " +
                           std::to_string(s.h) + "x" + std::to_string(s.w) + " -> " + std::to_string(s.c_out) + " k" +
                           std::to_string(s.kh) + " s" + std::to_string(s.stride) + " p" + std::to_string(s.pad);
  const float* bp = bias ? b.data() : nullptr;

  std::vector<float> y(yn, 7.0f), y_ref(yn), y_mag(yn);
  bf16.conv2d_forward(s, x.data(), w.data(), bp, y.data());
  ref.conv2d_forward(s, x.data(), w.data(), bp, y_ref.data());
  ref.conv2d_forward(s, ax.data(), aw.data(), nullptr, y_mag.data());
  double used = check_bf16(y, y_ref, y_mag, what + " forward y").largest;

  std::vector<float> dx(xn, 3.0f), dw(wn, 3.0f), db(s.c_out, 3.0f), dx_ref(xn), dw_ref(wn), db_ref(s.c_out), dx_mag(xn),
      dw_mag(wn), db_mag(s.c_out);
  bf16.conv2d_backward(s, x.data(), w.data(), dy.data(), dx.data(), dw.data(), bias ? db.data() : nullptr);
  ref.conv2d_backward(s, x.data(), w.data(), dy.data(), dx_ref.data(), dw_ref.data(), bias ? db_ref.data() : nullptr);
  ref.conv2d_backward(s, ax.data(), aw.data(), ady.data(), dx_mag.data(), dw_mag.data(), db_mag.data());
  used = std::max(used, check_bf16(dx, dx_ref, dx_mag, what + " backward dx").largest);
  used = std::max(used, check_bf16(dw, dw_ref, dw_mag, what + " backward dw").largest);
  if (bias) check_bf16(db, db_ref, db_mag, what + " backward db");
  EXPECT_GT(used, kVisible) << what << ": no bf16 rounding visible; are the operands float32?";
}

TEST(OneDnnBf16, ConvolutionWithinBf16Rounding) {
  struct Case {
    int64_t n, c_in, h, w, c_out, k, stride, pad;
  };
  // LeNet's and ResNet-20's shapes, stride 2, a 1x1 shortcut and odd sizes.
  const Case cases[] = {{4, 1, 28, 28, 20, 5, 1, 0},  {4, 20, 12, 12, 50, 5, 1, 0}, {2, 16, 32, 32, 16, 3, 1, 1},
                        {2, 16, 32, 32, 32, 3, 2, 1}, {2, 32, 16, 16, 64, 1, 2, 0}, {3, 3, 7, 9, 5, 3, 2, 1}};
  uint32_t seed = 40;
  for (const Case& c : cases) {
    compare_conv_bf16(ConvShape::make(c.n, c.c_in, c.h, c.w, c.c_out, c.k, c.stride, c.pad), (seed / 10) % 2 == 0,
                      seed);
    seed += 10;
  }
}

TEST(OneDnnBf16, GemmWithinBf16Rounding) {
  struct Case {
    bool ta, tb;
    int64_t m, n, k;
    float alpha, beta;
  };
  // The Linear layers' three GEMMs (forward, weight gradient, input gradient) of an MLP layer 784 -> 256, batch 64,
  // and odd sizes with alpha and beta.
  const Case cases[] = {{false, true, 64, 256, 784, 1.0f, 0.0f},
                        {true, false, 256, 784, 64, 1.0f, 0.0f},
                        {false, false, 64, 784, 256, 1.0f, 0.0f},
                        {true, true, 7, 13, 29, 0.5f, -0.25f}};
  uint32_t seed = 70;
  for (const Case& c : cases) {
    const int64_t lda = c.ta ? c.m : c.k, ldb = c.tb ? c.k : c.n, ldc = c.n;
    const std::vector<float> a = random_vector(c.m * c.k, seed), b = random_vector(c.k * c.n, seed + 1),
                             c0 = random_vector(c.m * c.n, seed + 2);
    std::vector<float> got = c0, want = c0, mag(c.m * c.n);
    CpuBackend bf16(2, CpuKernels::kOneDnn, /*block_channels=*/false, Precision::kBf16), ref(2, CpuKernels::kReference);
    bf16.gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta, got.data(), ldc);
    ref.gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta, want.data(), ldc);
    const std::vector<float> aa = absolute(a), ab = absolute(b);
    ref.gemm(c.ta, c.tb, c.m, c.n, c.k, std::fabs(c.alpha), aa.data(), lda, ab.data(), ldb, 0.0f, mag.data(), ldc);
    const std::string what = "bf16 gemm " + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
                             std::to_string(c.k) + " ta " + std::to_string(c.ta) + " tb " + std::to_string(c.tb);
    const Deviation d = check_bf16(got, want, mag, what);
    EXPECT_GT(d.largest, kVisible) << what << ": no bf16 rounding visible; are the operands float32?";
    seed += 3;
  }
}

TEST(OneDnnBf16, ValuesExactInBf16AreExact) {
  // Small integers are exact in bf16 and their products' sums exact in float32: bf16 compute must give the float32
  // result bit for bit (a bf16 rounding of the output, or a lost term, would not).
  const ConvShape s = ConvShape::make(2, 3, 6, 6, 4, 3, 1, 1);
  std::vector<float> x(2 * 3 * 36), w(4 * 3 * 9);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 7 % 11) - 5);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i * 5 % 9) - 4);
  CpuBackend bf16(1, CpuKernels::kOneDnn, /*block_channels=*/false, Precision::kBf16), ref(1, CpuKernels::kReference);
  std::vector<float> y(2 * 4 * 36), y_ref(y.size());
  bf16.conv2d_forward(s, x.data(), w.data(), nullptr, y.data());
  ref.conv2d_forward(s, x.data(), w.data(), nullptr, y_ref.data());
  EXPECT_EQ(y, y_ref);
}

TEST(OneDnnBf16, RefusesWhatItCannotCompute) {
  auto message = [](auto make) {
    try {
      make();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] {
              CpuBackend(1, CpuKernels::kReference, true, Precision::kBf16);
            }).find("train.precision = bf16 needs train.cpu_kernels = onednn"),
            std::string::npos);
  EXPECT_NE(message([] {
              CpuBackend(1, CpuKernels::kOneDnn, true, Precision::kFp16);
            }).find("no fp16 convolution or matmul on CPU"),
            std::string::npos);
  EXPECT_NE(CpuBackend(1, CpuKernels::kOneDnn, true, Precision::kBf16).describe().find("bf16 compute"),
            std::string::npos);
  EXPECT_EQ(precision_from_name("bf16"), Precision::kBf16);
  EXPECT_STREQ(precision_name(Precision::kFp16), "fp16");
  EXPECT_NE(message([] { precision_from_name("tf32"); }).find("'tf32'"), std::string::npos);
}

}  // namespace
}  // namespace pshard::models
