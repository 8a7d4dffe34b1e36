// The CPU backend in bf16 (train.precision = bf16: convolutions and GEMMs read bfloat16 operands, accumulate and
// write float32) against the float32 reference kernels, within the error bfloat16's rounding allows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.h"
#include "models/cpu/cpu_backend.h"
#include "models/cpu/onednn.h"
#include "models/model.h"
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
// oneDNN has bf16 kernels only on CPUs with AVX-512 (cpu::bf16_kernels_missing); elsewhere the tests
// that compute in bf16 skip, naming what is missing.
#define PSHARD_SKIP_WITHOUT_BF16()                                                   \
  do {                                                                               \
    if (const std::string missing = cpu::bf16_kernels_missing(); !missing.empty()) { \
      GTEST_SKIP() << missing;                                                       \
    }                                                                                \
  } while (false)

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

// An activation [n, c, hw] between NCHW and the backend's layout (NHWC in bf16 with block_channels: channel_block).
std::vector<float> regroup(Backend& b, int64_t n, int64_t c, int64_t hw, const std::vector<float>& v, bool to_backend) {
  std::vector<float> out(v.size());
  const int64_t block = b.channel_block(c);
  b.regroup_channels(n, c, hw, to_backend ? 1 : block, to_backend ? block : 1, v.data(), out.data());
  return out;
}

// block_channels = false: NCHW in and out, the arithmetic alone; true: the NHWC activations training runs on.
void compare_conv_bf16(const ConvShape& s, bool bias, bool block_channels, uint32_t seed) {
  CpuBackend bf16(2, CpuKernels::kOneDnn, block_channels, Precision::kBf16), ref(2, CpuKernels::kReference);
  const size_t xn = s.n * s.c_in * s.h * s.w, wn = s.c_out * s.c_in * s.kh * s.kw,
               yn = s.n * s.c_out * s.h_out * s.w_out;
  const int64_t hw = s.h * s.w, hw_out = s.h_out * s.w_out;
  const std::vector<float> x = random_vector(xn, seed), w = random_vector(wn, seed + 1),
                           b = random_vector(s.c_out, seed + 2), dy = random_vector(yn, seed + 3);
  const std::vector<float> ax = absolute(x), aw = absolute(w), ady = absolute(dy);
  const std::string what = "bf16 conv n" + std::to_string(s.n) + " c" + std::to_string(s.c_in) + " " +
                           std::to_string(s.h) + "x" + std::to_string(s.w) + " -> " + std::to_string(s.c_out) + " k" +
                           std::to_string(s.kh) + " s" + std::to_string(s.stride) + " p" + std::to_string(s.pad) +
                           (block_channels ? " nhwc" : " nchw");
  const float* bp = bias ? b.data() : nullptr;

  const std::vector<float> x_in = regroup(bf16, s.n, s.c_in, hw, x, true),
                           dy_in = regroup(bf16, s.n, s.c_out, hw_out, dy, true);
  std::vector<float> y(yn, 7.0f), y_ref(yn), y_mag(yn);
  bf16.conv2d_forward(s, x_in.data(), w.data(), bp, y.data());
  y = regroup(bf16, s.n, s.c_out, hw_out, y, false);
  ref.conv2d_forward(s, x.data(), w.data(), bp, y_ref.data());
  ref.conv2d_forward(s, ax.data(), aw.data(), nullptr, y_mag.data());
  double used = check_bf16(y, y_ref, y_mag, what + " forward y").largest;

  std::vector<float> dx(xn, 3.0f), dw(wn, 3.0f), db(s.c_out, 3.0f), dx_ref(xn), dw_ref(wn), db_ref(s.c_out), dx_mag(xn),
      dw_mag(wn), db_mag(s.c_out);
  bf16.conv2d_backward(s, x_in.data(), w.data(), dy_in.data(), dx.data(), dw.data(), bias ? db.data() : nullptr);
  dx = regroup(bf16, s.n, s.c_in, hw, dx, false);
  ref.conv2d_backward(s, x.data(), w.data(), dy.data(), dx_ref.data(), dw_ref.data(), bias ? db_ref.data() : nullptr);
  ref.conv2d_backward(s, ax.data(), aw.data(), ady.data(), dx_mag.data(), dw_mag.data(), db_mag.data());
  used = std::max(used, check_bf16(dx, dx_ref, dx_mag, what + " backward dx").largest);
  used = std::max(used, check_bf16(dw, dw_ref, dw_mag, what + " backward dw").largest);
  if (bias) check_bf16(db, db_ref, db_mag, what + " backward db");
  if (s.c_in >= 4) {
    EXPECT_GT(used, kVisible) << what << ": no bf16 rounding visible; are the operands float32?";
  } else {
    // Fewer than 4 input channels stay float32 (onednn_conv.cc): float32's rounding only.
    EXPECT_LT(used, 1e-5) << what << ": a convolution of " << s.c_in << " input channels ran in bf16";
  }
}

TEST(OneDnnBf16, ConvolutionWithinBf16Rounding) {
  PSHARD_SKIP_WITHOUT_BF16();
  struct Case {
    int64_t n, c_in, h, w, c_out, k, stride, pad;
  };
  // LeNet's and ResNet-20's shapes, stride 2, a 1x1 shortcut and odd sizes; 1 and 3 input channels stay float32.
  const Case cases[] = {{4, 1, 28, 28, 20, 5, 1, 0},  {4, 20, 12, 12, 50, 5, 1, 0}, {2, 16, 32, 32, 16, 3, 1, 1},
                        {2, 16, 32, 32, 32, 3, 2, 1}, {2, 32, 16, 16, 64, 1, 2, 0}, {3, 3, 7, 9, 5, 3, 2, 1},
                        {3, 5, 7, 9, 6, 3, 2, 1}};
  uint32_t seed = 40;
  for (const Case& c : cases) {
    const ConvShape s = ConvShape::make(c.n, c.c_in, c.h, c.w, c.c_out, c.k, c.stride, c.pad);
    for (bool block : {false, true}) compare_conv_bf16(s, (seed / 10) % 2 == 0, block, seed);
    seed += 10;
  }
}

TEST(OneDnnBf16, GemmWithinBf16Rounding) {
  PSHARD_SKIP_WITHOUT_BF16();
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
  PSHARD_SKIP_WITHOUT_BF16();
  // Small integers are exact in bf16 and their products' sums exact in float32: bf16 compute must give the float32
  // result bit for bit (a bf16 rounding of the output, or a lost term, would not).
  const ConvShape s = ConvShape::make(2, 5, 6, 6, 4, 3, 1, 1);
  std::vector<float> x(2 * 5 * 36), w(4 * 5 * 9);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 7 % 11) - 5);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i * 5 % 9) - 4);
  CpuBackend bf16(1, CpuKernels::kOneDnn, /*block_channels=*/false, Precision::kBf16), ref(1, CpuKernels::kReference);
  std::vector<float> y(2 * 4 * 36), y_ref(y.size());
  bf16.conv2d_forward(s, x.data(), w.data(), nullptr, y.data());
  ref.conv2d_forward(s, x.data(), w.data(), nullptr, y_ref.data());
  EXPECT_EQ(y, y_ref);
}

// In bf16 the activations are NHWC (channel_block(c) = c), and batch norm and pooling run float32 on them: they must
// match the float32 reference as closely as in the NCHW / nChw16c layouts (onednn_test's 1e-5).
TEST(OneDnnBf16, BatchNormAndPoolingOnNhwcActivations) {
  PSHARD_SKIP_WITHOUT_BF16();
  CpuBackend bf16(2, CpuKernels::kOneDnn, /*block_channels=*/true, Precision::kBf16), ref(2, CpuKernels::kReference);
  EXPECT_EQ(bf16.channel_block(20), 20);
  EXPECT_EQ(bf16.channel_block(16), 16);
  EXPECT_EQ(bf16.channel_block(1), 1);
  const int64_t n = 4, c = 20, h = 8, w = 6, hw = h * w;
  const std::vector<float> x = random_vector(n * c * hw, 5), dy = random_vector(n * c * hw, 6),
                           gamma = random_vector(c, 7, 0.5f, 1.5f), beta = random_vector(c, 8);
  auto close = [](const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-5 * std::max(1.0f, std::fabs(want[i]))) << what << "[" << i << "]";
    }
  };
  std::vector<float> mean(c), invstd(c), rmean(c, 0.0f), rvar(c, 1.0f), y(x.size()), dx(x.size()), dg(c), db(c);
  std::vector<float> mean_r(c), invstd_r(c), rmean_r(c, 0.0f), rvar_r(c, 1.0f), y_r(x.size()), dx_r(x.size()), dg_r(c),
      db_r(c);
  const std::vector<float> x_in = regroup(bf16, n, c, hw, x, true), dy_in = regroup(bf16, n, c, hw, dy, true);
  bf16.batchnorm_forward_train(n, c, hw, x_in.data(), gamma.data(), beta.data(), 1e-5f, 0.1f, rmean.data(), rvar.data(),
                               mean.data(), invstd.data(), y.data());
  bf16.batchnorm_backward(n, c, hw, x_in.data(), dy_in.data(), gamma.data(), mean.data(), invstd.data(), dx.data(),
                          dg.data(), db.data());
  ref.batchnorm_forward_train(n, c, hw, x.data(), gamma.data(), beta.data(), 1e-5f, 0.1f, rmean_r.data(), rvar_r.data(),
                              mean_r.data(), invstd_r.data(), y_r.data());
  ref.batchnorm_backward(n, c, hw, x.data(), dy.data(), gamma.data(), mean_r.data(), invstd_r.data(), dx_r.data(),
                         dg_r.data(), db_r.data());
  close(regroup(bf16, n, c, hw, y, false), y_r, "batch norm y");
  close(regroup(bf16, n, c, hw, dx, false), dx_r, "batch norm dx");
  close(dg, dg_r, "batch norm dgamma");
  close(rvar, rvar_r, "batch norm running variance");

  const PoolShape p = PoolShape::make(n, c, h, w, 2, 2, 0);
  const int64_t hw_out = p.h_out * p.w_out;
  const std::vector<float> xs = testing::spaced_vector(x.size(), 9), xs_in = regroup(bf16, n, c, hw, xs, true),
                           dyp = random_vector(n * c * hw_out, 10), dyp_in = regroup(bf16, n, c, hw_out, dyp, true);
  std::vector<float> py(n * c * hw_out), py_r(py.size()), pdx(x.size()), pdx_r(x.size());
  bf16.maxpool2d_forward(p, xs_in.data(), py.data());
  bf16.maxpool2d_backward(p, xs_in.data(), py.data(), dyp_in.data(), pdx.data());
  ref.maxpool2d_forward(p, xs.data(), py_r.data());
  ref.maxpool2d_backward(p, xs.data(), py_r.data(), dyp.data(), pdx_r.data());
  close(regroup(bf16, n, c, hw_out, py, false), py_r, "max pool y");
  close(regroup(bf16, n, c, hw, pdx, false), pdx_r, "max pool dx");
}

// The relative L2 distance of every gradient of two models after one step on the same batch (largest of them, and of
// the last layer's), and their losses.
struct StepDistance {
  double loss_a, loss_b, largest, last_layer;
};
StepDistance one_step(Backend& ba, Backend& bb, const std::string& name, const std::vector<int64_t>& input) {
  ModelSpec spec;
  spec.name = name;
  spec.input_shape = input;
  spec.hidden = {256, 128};
  spec.num_classes = 10;
  auto a = Model::create(spec, ba), b = Model::create(spec, bb);
  a->init_params(3);
  b->init_params(3);
  const int64_t n = 16;
  const std::vector<float> x = random_vector(n * input[0] * input[1] * input[2], 21);
  std::vector<int32_t> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<int32_t>(i % 10);
  StepDistance d{a->forward(x.data(), n, labels.data(), nullptr, true).loss_sum,
                 b->forward(x.data(), n, labels.data(), nullptr, true).loss_sum, 0.0, 0.0};
  a->backward();
  b->backward();
  for (size_t p = 0; p < a->params().size(); ++p) {
    const ParamRef &pa = a->params()[p], &pb = b->params()[p];
    double diff = 0.0, norm = 0.0;
    for (int64_t i = 0; i < pa.numel; ++i) {
      const double e = static_cast<double>(pa.grad[i]) - pb.grad[i];
      diff += e * e;
      norm += static_cast<double>(pb.grad[i]) * pb.grad[i];
    }
    const double rel = std::sqrt(diff / std::max(norm, 1e-30));
    d.largest = std::max(d.largest, rel);
    if (p + 2 >= a->params().size()) d.last_layer = std::max(d.last_layer, rel);  // its weight and bias
  }
  return d;
}

// Whole models in bf16 with the NHWC activations training runs on (Flatten and the option-A shortcut regrouping them)
// against the same models in bf16 with NCHW activations, and against float32. bf16 NHWC and NCHW read the same bf16
// operands, but float32 summation order differs and moves some values across a bf16 rounding boundary, so deep
// models drift apart by bf16's noise: their losses within 1e-3 and the last layer's gradients (fed by Flatten) within
// 2%, where a misplaced channel is off by the values' size. Against float32: the loss within 1%, and every gradient
// within 60% (relative L2). At initialisation on random data the gradients of the early layers are sums that cancel,
// and bf16 moves them a lot: PyTorch 1.13's torch.autocast bf16 on the same architectures and batch moves ResNet-20's
// by up to 44% and LeNet's by 14% (pshard: 36% and 5%, its first LeNet convolution being float32).
TEST(OneDnnBf16, ModelsInNhwcMatchNchwAndFloat32) {
  PSHARD_SKIP_WITHOUT_BF16();
  struct Case {
    const char* name;
    std::vector<int64_t> input;
  };
  for (const Case& c : {Case{"mlp", {1, 28, 28}}, Case{"lenet", {1, 28, 28}}, Case{"resnet20", {3, 32, 32}}}) {
    CpuBackend nhwc(2, CpuKernels::kOneDnn, /*block_channels=*/true, Precision::kBf16),
        nchw(2, CpuKernels::kOneDnn, /*block_channels=*/false, Precision::kBf16), fp32(2);
    const StepDistance layout = one_step(nhwc, nchw, c.name, c.input);
    EXPECT_NEAR(layout.loss_a, layout.loss_b, 1e-3 * std::fabs(layout.loss_b)) << c.name << ": NHWC against NCHW";
    EXPECT_LT(layout.last_layer, 0.02) << c.name << ": NHWC against NCHW";
    const StepDistance rounding = one_step(nhwc, fp32, c.name, c.input);
    EXPECT_NEAR(rounding.loss_a, rounding.loss_b, 0.01 * std::fabs(rounding.loss_b)) << c.name;
    EXPECT_LT(rounding.largest, 0.6) << c.name << ": bf16 against float32";
    EXPECT_GT(rounding.largest, kVisible) << c.name << ": gradients equal to float32's; did the model run in bf16?";
    std::printf("%s: gradients bf16 NHWC vs NCHW %.2g, bf16 vs fp32 %.2g (largest relative L2)\n", c.name,
                layout.largest, rounding.largest);
  }
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
  // Where oneDNN has no bf16 kernels for the CPU (AVX2 alone), the backend says so as it is made, not at its first
  // convolution.
  const std::string missing = cpu::bf16_kernels_missing();
  if (missing.empty()) {
    EXPECT_NE(CpuBackend(1, CpuKernels::kOneDnn, true, Precision::kBf16).describe().find("bf16 compute"),
              std::string::npos);
  } else {
    EXPECT_EQ(message([] { CpuBackend(1, CpuKernels::kOneDnn, true, Precision::kBf16); }),
              "cpu backend: train.precision = bf16: " + missing + "; train in fp32 on this machine");
    EXPECT_NE(missing.find("has no bf16 convolution or matmul for this CPU"), std::string::npos) << missing;
  }
  EXPECT_EQ(precision_from_name("bf16"), Precision::kBf16);
  EXPECT_STREQ(precision_name(Precision::kFp16), "fp16");
  EXPECT_NE(message([] { precision_from_name("tf32"); }).find("'tf32'"), std::string::npos);
}

}  // namespace
}  // namespace pshard::models
