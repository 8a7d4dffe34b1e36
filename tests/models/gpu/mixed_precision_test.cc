// The CUDA backend in bf16 and fp16 (tensor-core GEMMs and channels-last cuDNN convolutions over 16-bit copies of
// the operands) against the CPU's float32 kernels run on the same operands rounded to 16 bits on the host; loss
// scaling's unscale-and-check on the device; a LeNet and a ResNet-20 step against float32 (skipped without a GPU).
//
// Tolerances, per operation (eps = 2^-23, float32's; u = the 16-bit type's unit roundoff: 2^-8 bf16, 2^-11 fp16):
// - GEMM: products of two 16-bit numbers are exact in float32, so only the summation differs from the CPU's: its
//   order, and tensor cores' float32 accumulation, which aligns a block's products to the largest and truncates
//   (not IEEE round to nearest): |gpu - cpu| <= 64 eps * sum|terms|. Rounding the operands moves the result by
//   about 1000 (fp16) to 8000 (bf16) eps * sum|terms| at these sizes, so the check still sees a wrong operand.
// - Convolution: the same, and cuDNN writes y, dx and dw as 16 bits, so each output is also rounded once (y before
//   its bias is added): |gpu - cpu| <= u * |cpu without bias| + 64 eps * sum|terms| (+ 2^-24 for fp16's subnormals).
// - Whole models: how far a step's gradients are from the float32 CPU model's is a property of the network as much
//   as of the arithmetic (at initialisation on random data, pshard's own CPU path that rounds only the operands moves
//   LeNet's by 5 % (fp16) to 10 % (bf16) and ResNet-20's by 8 % to 25 % of their norms), so the GPU is held to that
//   path: each gradient's distance from float32 at most 2.5 x the CPU's same-precision distance (+ 1e-3), and the
//   loss within 1e-2. Measured on an H200 (2026-11-28): 1.1 to 1.5 x. A layout or indexing error is of order 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/compression/fp16.h"
#include "common/error.h"
#include "models/backend.h"
#include "models/cpu/cpu_backend.h"
#include "models/cuda/cuda_backend.h"
#include "models/device.h"
#include "models/model.h"
#include "tests/models/gpu/gpu_compare.h"

namespace pshard::models {
namespace {

using gpu_test::absolute;
using gpu_test::Array;
using gpu_test::expect_each_within;
using gpu_test::number;
using gpu_test::random_floats;

constexpr double kEps = 1.1920928955078125e-07;

std::vector<float> rounded(std::vector<float> v, Precision p) {
  if (p == Precision::kFp16) {
    compression::round_to_fp16(v.data(), v.size());
    return v;
  }
  for (float& x : v) {  // bf16: round to nearest even on the upper 16 bits (no NaN in these inputs)
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
    std::memcpy(&x, &bits, sizeof bits);
  }
  return v;
}

// Half the spacing at the bottom of a binade, relative: 8 significant bits (bf16), 11 (fp16).
double unit_roundoff(Precision p) { return p == Precision::kFp16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8); }

class MixedPrecision : public ::testing::TestWithParam<Precision> {
 protected:
  void SetUp() override {
    PSHARD_REQUIRE_GPU();
    cpu_ = std::make_unique<CpuBackend>(2, CpuKernels::kOneDnn, /*block_channels=*/false);
    gpu_ = make_cuda_backend(0, /*allow_tf32=*/false, CudaConvWgrad::kGemm, kCudaWgradWorkspaceBytes, GetParam());
  }
  CudaBackend& cuda() { return dynamic_cast<CudaBackend&>(*gpu_); }
  std::string tag() const { return precision_name(GetParam()); }
  std::unique_ptr<Backend> cpu_, gpu_;
};

TEST_P(MixedPrecision, DescribesItsTensorCores) {
  EXPECT_NE(gpu_->describe().find(tag() + " tensor cores"), std::string::npos) << gpu_->describe();
}

TEST_P(MixedPrecision, GemmAllTransposesMatchTheRoundedOperandsInFloat32) {
  const int64_t m = 67, n = 45, k = 131;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
      const int64_t lda = a_cols + 5, ldb = b_cols + 3, ldc = n + 2;
      const auto a = random_floats(a_rows * lda, 10 + ta), b = random_floats(b_rows * ldb, 20 + tb);
      const auto c0 = random_floats(m * ldc, 30);
      const std::string what = tag() + " gemm ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
      Array ar(*cpu_, rounded(a, GetParam())), br(*cpu_, rounded(b, GetParam())), cr(*cpu_, c0);
      Array aa(*cpu_, absolute(rounded(a, GetParam()))), ba(*cpu_, absolute(rounded(b, GetParam()))),
          ca(*cpu_, absolute(c0));
      Array ag(*gpu_, a), bg(*gpu_, b), cg(*gpu_, c0);
      cpu_->gemm(ta, tb, m, n, k, 0.5f, ar.get(), lda, br.get(), ldb, 0.25f, cr.get(), ldc);
      cpu_->gemm(ta, tb, m, n, k, 0.5f, aa.get(), lda, ba.get(), ldb, 0.25f, ca.get(), ldc);
      gpu_->gemm(ta, tb, m, n, k, 0.5f, ag.get(), lda, bg.get(), ldb, 0.25f, cg.get(), ldc);
      const auto ref = cr.host(), mag = ca.host(), got = cg.host();
      expect_each_within(
          ref, got, what, [&](size_t i) { return 64 * kEps * mag[i]; },
          [&](size_t i) { return "64 eps x sum|terms| = " + number(64 * kEps * mag[i]); });
      // The operands were rounded: against the unrounded float32 product the error is of the 16-bit type's size.
      Array af(*cpu_, a), bf(*cpu_, b), cf(*cpu_, c0);
      cpu_->gemm(ta, tb, m, n, k, 0.5f, af.get(), lda, bf.get(), ldb, 0.25f, cf.get(), ldc);
      const auto exact = cf.host();
      double worst = 0.0;
      for (size_t i = 0; i < exact.size(); ++i)
        worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - exact[i]) / mag[i]);
      EXPECT_GT(worst, 256 * kEps) << what << ": no sign of 16-bit operands";
      EXPECT_LT(worst, 4 * unit_roundoff(GetParam())) << what;
    }
  }
}

TEST_P(MixedPrecision, ConvolutionsMatchTheRoundedOperandsInFloat32) {
  struct Case {
    int64_t n, c_in, h, w, c_out, k, stride, pad;
    bool bias, need_dx;
  };
  // ResNet's shapes (3x3, 1x1 projections with stride 2, 64+ channels), LeNet's (1 and 6 input channels, 5x5), a
  // 7x7 stride-2 stem on 3 channels, odd sizes.
  const std::vector<Case> cases = {
      {4, 16, 16, 16, 16, 3, 1, 1, false, true}, {2, 64, 14, 14, 128, 1, 2, 0, false, true},
      {3, 32, 9, 11, 64, 3, 2, 1, false, true},  {2, 1, 28, 28, 6, 5, 1, 0, true, false},
      {2, 6, 12, 12, 16, 5, 1, 0, true, true},   {2, 3, 32, 32, 64, 7, 2, 3, false, false}};
  const Precision p = GetParam();
  const double u = unit_roundoff(p), floor = p == Precision::kFp16 ? std::ldexp(1.0, -24) : 0.0;
  uint64_t seed = 70;
  int mixed_plans = 0;
  for (const Case& c : cases) {
    const ConvShape s = ConvShape::make(c.n, c.c_in, c.h, c.w, c.c_out, c.k, c.stride, c.pad);
    const bool mixed = cuda().convolution_runs_16bit(s);
    mixed_plans += mixed;
    const std::string name = tag() + (mixed ? "" : " (float32 fallback)") + " conv " + std::to_string(c.c_in) + "->" +
                             std::to_string(c.c_out) + " k" + std::to_string(c.k) + " s" + std::to_string(c.stride);
    const int64_t nx = s.n * s.c_in * s.h * s.w, nw = s.c_out * s.c_in * s.kh * s.kw,
                  ny = s.n * s.c_out * s.h_out * s.w_out;
    const auto x = random_floats(nx, seed++), w = random_floats(nw, seed++), b = random_floats(s.c_out, seed++),
               dy = random_floats(ny, seed++);
    // The reference reads what the GPU reads: 16-bit operands, unless the geometry runs in float32 there.
    const auto xr = mixed ? rounded(x, p) : x, wr = mixed ? rounded(w, p) : w, dyr = mixed ? rounded(dy, p) : dy;
    Array xc(*cpu_, xr), wc(*cpu_, wr), bc(*cpu_, b), yc(*cpu_, ny), dyc(*cpu_, dyr), dxc(*cpu_, nx), dwc(*cpu_, nw),
        dbc(*cpu_, s.c_out);
    Array xa(*cpu_, absolute(xr)), wa(*cpu_, absolute(wr)), ba(*cpu_, absolute(b)), dya(*cpu_, absolute(dyr)),
        ya(*cpu_, ny), dxa(*cpu_, nx), dwa(*cpu_, nw), dba(*cpu_, s.c_out);
    Array xg(*gpu_, x), wg(*gpu_, w), bg(*gpu_, b), yg(*gpu_, ny), dyg(*gpu_, dy), dxg(*gpu_, nx), dwg(*gpu_, nw),
        dbg(*gpu_, s.c_out);
    gpu_->fill(yg.get(), ny, std::numeric_limits<float>::quiet_NaN());  // every output element must be written
    gpu_->fill(dwg.get(), nw, std::numeric_limits<float>::quiet_NaN());
    if (c.need_dx) gpu_->fill(dxg.get(), nx, std::numeric_limits<float>::quiet_NaN());
    const float* bias_c = c.bias ? bc.get() : nullptr;
    cpu_->conv2d_forward(s, xa.get(), wa.get(), c.bias ? ba.get() : nullptr, ya.get());
    cpu_->conv2d_backward(s, xa.get(), wa.get(), dya.get(), c.need_dx ? dxa.get() : nullptr, dwa.get(),
                          c.bias ? dba.get() : nullptr);
    cpu_->conv2d_forward(s, xc.get(), wc.get(), bias_c, yc.get());
    cpu_->conv2d_backward(s, xc.get(), wc.get(), dyc.get(), c.need_dx ? dxc.get() : nullptr, dwc.get(),
                          c.bias ? dbc.get() : nullptr);
    gpu_->conv2d_forward(s, xg.get(), wg.get(), c.bias ? bg.get() : nullptr, yg.get());
    gpu_->conv2d_backward(s, xg.get(), wg.get(), dyg.get(), c.need_dx ? dxg.get() : nullptr, dwg.get(),
                          c.bias ? dbg.get() : nullptr);
    const double out_u = mixed ? u : 0.0;
    // `rounded_part(i)`: what cuDNN wrote before it was widened (the forward's output without its bias).
    auto check = [&](const Array& ref, const Array& got, const Array& mag, const std::string& what,
                     const std::function<double(const std::vector<float>&, size_t)>& rounded_part) {
      const auto r = ref.host(), g = got.host(), m = mag.host();
      auto allowed = [&](size_t i) { return out_u * std::fabs(rounded_part(r, i)) + 64 * kEps * m[i] + floor; };
      expect_each_within(r, g, name + " " + what, allowed,
                         [&](size_t i) { return "u |cpu| + 64 eps x sum|terms| = " + number(allowed(i)); });
    };
    auto whole = [](const std::vector<float>& r, size_t i) { return static_cast<double>(r[i]); };
    auto without_bias = [&](const std::vector<float>& r, size_t i) {
      const int64_t channel = static_cast<int64_t>(i) / (s.h_out * s.w_out) % s.c_out;
      return static_cast<double>(r[i]) - (c.bias ? b[channel] : 0.0f);
    };
    check(yc, yg, ya, "forward", without_bias);
    check(dwc, dwg, dwa, "dw", whole);
    if (c.bias) {  // from the float32 dy on the GPU: against the CPU's bias gradient of the unrounded dy
      Array dyf(*cpu_, dy), dbf(*cpu_, s.c_out);
      cpu_->bias_grad(dyf.get(), s.n, s.c_out, s.h_out * s.w_out, dbf.get());
      const auto r = dbf.host(), g = dbg.host(), m = dba.host();
      expect_each_within(
          r, g, name + " db", [&](size_t i) { return 16 * kEps * m[i]; },
          [&](size_t i) { return "16 eps x sum|terms| = " + number(16 * kEps * m[i]); });
    }
    if (c.need_dx) check(dxc, dxg, dxa, "dx", whole);
  }
  // ResNet's geometries (16+ channels) must not fall back to float32.
  EXPECT_GE(mixed_plans, 3) << tag() << ": cuDNN ran too few of the convolutions in 16 bits";
}

TEST_P(MixedPrecision, UnscaleAndCheckOnTheDevice) {
  std::vector<float> g1 = random_floats(100003, 5), g2 = {65536.0f, -3.0f * 65536.0f, 0.5f};
  for (float& v : g1) v *= 1024.0f;
  Array a(*gpu_, g1), b(*gpu_, g2);
  EXPECT_TRUE(gpu_->scale_and_check({{a.get(), 100003}, {b.get(), 3}}, 1.0f / 1024.0f));
  const auto back = a.host();
  for (size_t i = 0; i < g1.size(); i += 997) EXPECT_EQ(back[i], g1[i] / 1024.0f) << i;
  EXPECT_EQ(b.host()[1], -3.0f * 64.0f);
  gpu_->fill(a.get() + 77777, 1, std::numeric_limits<float>::infinity());
  EXPECT_FALSE(gpu_->scale_and_check({{a.get(), 100003}, {b.get(), 3}}, 1.0f));
  gpu_->fill(a.get() + 77777, 1, std::numeric_limits<float>::quiet_NaN());
  EXPECT_FALSE(gpu_->scale_and_check({{b.get(), 3}, {a.get(), 100003}}, 1.0f));
  EXPECT_TRUE(gpu_->scale_and_check({{b.get(), 3}}, 1.0f));
  // A finite value that overflows when scaled is not finite any more.
  EXPECT_FALSE(gpu_->scale_and_check({{b.get(), 3}}, 1e38f));
}

// One forward + backward of a whole model from the same weights and data on the float32 CPU backend, on the CPU
// backend in the same precision (its operands rounded: oneDNN's bf16 kernels, or float32 kernels on half-rounded
// operands) and on the GPU; per parameter, the gradient's distance from float32 relative to its norm.
struct Distances {
  double loss_fp32 = 0, loss_gpu = 0;
  std::vector<std::string> names;
  std::vector<double> gpu, cpu;  // ||g - g32|| / ||g32||
};

Distances step_distances(Backend& gpu, Precision precision, const std::string& model, std::vector<int64_t> input,
                         int64_t batch) {
  auto fp32 = make_cpu_backend(2);
  auto same = make_cpu_backend(2, CpuKernels::kOneDnn, precision);
  ModelSpec spec;
  spec.name = model;
  spec.input_shape = input;
  spec.num_classes = 10;
  spec.target_dim = 0;
  auto m32 = Model::create(spec, *fp32);
  auto mcp = Model::create(spec, *same);
  auto mg = Model::create(spec, gpu);
  int64_t per_sample = 1;
  for (int64_t d : input) per_sample *= d;
  const auto x = random_floats(static_cast<size_t>(batch * per_sample), 500);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[i] = static_cast<int32_t>(i * 3 % 10);
  Distances d;
  for (Model* m : {m32.get(), mcp.get(), mg.get()}) {
    m->init_params(42);
    const double loss = m->forward(x.data(), batch, labels.data(), nullptr, true).loss_sum;
    if (m == m32.get()) d.loss_fp32 = loss;
    if (m == mg.get()) d.loss_gpu = loss;
    m->backward();
  }
  auto grad = [](Model& m, size_t i) {
    const ParamRef& p = m.params()[i];
    std::vector<float> v(static_cast<size_t>(p.numel));
    m.backend().download(v.data(), p.grad, sizeof(float) * v.size());
    return v;
  };
  auto distance = [](const std::vector<float>& g, const std::vector<float>& ref) {
    double diff = 0.0, norm = 0.0;
    for (size_t j = 0; j < ref.size(); ++j) {
      diff += (static_cast<double>(g[j]) - ref[j]) * (static_cast<double>(g[j]) - ref[j]);
      norm += static_cast<double>(ref[j]) * ref[j];
    }
    return std::sqrt(diff) / (std::sqrt(norm) + 1e-30);
  };
  for (size_t i = 0; i < m32->params().size(); ++i) {
    const auto ref = grad(*m32, i);
    d.names.push_back(m32->params()[i].name);
    d.gpu.push_back(distance(grad(*mg, i), ref));
    d.cpu.push_back(distance(grad(*mcp, i), ref));
  }
  return d;
}

void expect_like_the_cpu_path(Backend& gpu, Precision precision, const std::string& model, std::vector<int64_t> input,
                              int64_t batch) {
  Distances d;
  try {
    d = step_distances(gpu, precision, model, std::move(input), batch);
  } catch (const Error& e) {  // the CPU side: oneDNN's bf16 kernels need AVX512 (AVX512_BF16/AMX natively)
    if (std::string(e.what()).find("cuda") != std::string::npos) throw;
    GTEST_SKIP() << "the CPU cannot run " << precision_name(precision) << " to compare with: " << e.what();
  }
  EXPECT_NEAR(d.loss_gpu, d.loss_fp32, 1e-2 * std::fabs(d.loss_fp32)) << model;
  for (size_t i = 0; i < d.names.size(); ++i) {
    EXPECT_LE(d.gpu[i], 2.5 * d.cpu[i] + 1e-3)
        << model << " grad " << d.names[i] << ": the GPU's distance from float32 " << d.gpu[i]
        << ", the CPU's in the same precision " << d.cpu[i];
  }
}

TEST_P(MixedPrecision, LenetStepIsAsCloseToFloat32AsTheCpuInTheSamePrecision) {
  expect_like_the_cpu_path(*gpu_, GetParam(), "lenet", {1, 28, 28}, 32);
}

TEST_P(MixedPrecision, Resnet20StepIsAsCloseToFloat32AsTheCpuInTheSamePrecision) {
  expect_like_the_cpu_path(*gpu_, GetParam(), "resnet20", {3, 32, 32}, 16);
}

INSTANTIATE_TEST_SUITE_P(Cuda, MixedPrecision, ::testing::Values(Precision::kBf16, Precision::kFp16),
                         [](const ::testing::TestParamInfo<Precision>& info) {
                           return std::string(precision_name(info.param));
                         });

}  // namespace
}  // namespace pshard::models
