// The CUDA convolution weight gradient as im2col + cuBLAS SGEMM (train.cuda_conv_wgrad = gemm), in one chunk, in
// several and one sample per chunk, against the CPU reference and cuDNN's, and bitwise repeatable (skipped without a
// GPU).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "models/backend.h"
#include "models/device.h"
#include "tests/models/gpu/gpu_compare.h"

namespace pshard::models {
namespace {

using gpu_test::absolute;
using gpu_test::Array;
using gpu_test::expect_within_sum_rounding;
using gpu_test::random_floats;

struct Case {
  int64_t n, c_in, h, w, c_out, k, stride, pad;
};

// The geometries of CudaVsCpu.Conv2dForwardBackward (odd sizes, stride 2, padding, 1x1 and 5x5 kernels), batch 1,
// ResNet-20's three stages at batch 128 (a stride-2 transition included), and the edges of im2col's 32 x 32 tiles of
// cols [(n, p), (c, r, q)]: P and C*KH*KW not multiples of 32 (tiles span samples; partial tiles at both edges), many
// column tiles, w_out above 32, a 1x1 stride-2 projection of odd size, and (in 4 MiB chunks) chunks of 7 and 3 samples
// of P = 900: 6300 rows, so the first chunk's last row tile is partial and the second's tiles start at its sample 0.
const std::vector<Case> kCases = {
    {2, 3, 9, 11, 5, 3, 1, 1},      {3, 4, 8, 8, 6, 5, 2, 2},       {4, 16, 8, 8, 32, 1, 2, 0},
    {2, 1, 28, 28, 6, 5, 1, 0},     {8, 16, 32, 32, 16, 3, 1, 1},   {1, 3, 7, 5, 4, 3, 2, 1},
    {128, 3, 32, 32, 16, 3, 1, 1},  {128, 16, 32, 32, 16, 3, 1, 1}, {128, 16, 32, 32, 32, 3, 2, 1},
    {128, 32, 16, 16, 32, 3, 1, 1}, {128, 64, 8, 8, 64, 3, 1, 1},   {3, 5, 7, 9, 4, 3, 1, 1},
    {5, 7, 13, 10, 8, 3, 2, 1},     {2, 40, 6, 6, 8, 3, 1, 1},      {3, 2, 5, 40, 3, 3, 1, 0},
    {3, 24, 9, 7, 8, 1, 2, 0},      {10, 16, 30, 30, 16, 3, 1, 1}};

// Chunk limits: the default (every case in one chunk), 4 MiB (ResNet-20's 16->16 layer at 32x32 needs 640 KiB a
// sample: 6 samples a chunk, 22 chunks, the last of 2; its 64->64 layer at 8x8, 160 KiB: 25 a chunk, 6 chunks, the
// last of 3) and 1 byte (one sample per chunk, where dy needs no rearranging).
const std::vector<std::pair<size_t, std::string>> kLimits = {
    {kCudaWgradWorkspaceBytes, "one chunk"}, {size_t{4} << 20, "4 MiB chunks"}, {1, "one sample per chunk"}};

std::string name_of(const Case& c) {
  return "conv n" + std::to_string(c.n) + " " + std::to_string(c.c_in) + "->" + std::to_string(c.c_out) + " " +
         std::to_string(c.h) + "x" + std::to_string(c.w) + " k" + std::to_string(c.k) + " s" +
         std::to_string(c.stride) + " p" + std::to_string(c.pad);
}

// dw of one case on `b` (dx and db too, as a layer asks for them, so the shared workspace is exercised); dw starts at
// 7, which a first chunk that added to it instead of overwriting would leave behind.
std::vector<float> weight_gradient(Backend& b, const ConvShape& s, const std::vector<float>& x,
                                   const std::vector<float>& w, const std::vector<float>& dy) {
  Array xd(b, x), wd(b, w), dyd(b, dy), dxd(b, x.size()), dwd(b, w.size(), 7.0f), dbd(b, s.c_out);
  b.conv2d_backward(s, xd.get(), wd.get(), dyd.get(), dxd.get(), dwd.get(), dbd.get());
  return dwd.host();
}

struct Inputs {
  ConvShape s;
  std::vector<float> x, w, dy;
};

Inputs inputs_of(const Case& c, uint64_t seed) {
  Inputs in;
  in.s = ConvShape::make(c.n, c.c_in, c.h, c.w, c.c_out, c.k, c.stride, c.pad);
  const ConvShape& s = in.s;
  in.x = random_floats(s.n * s.c_in * s.h * s.w, seed);
  in.w = random_floats(s.c_out * s.c_in * s.kh * s.kw, seed + 1);
  in.dy = random_floats(s.n * s.c_out * s.h_out * s.w_out, seed + 2);
  return in;
}

class ConvWgradOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    PSHARD_REQUIRE_GPU();
    cpu_ = make_cpu_backend(2, CpuKernels::kReference);
    cudnn_ = make_cuda_backend(0, /*allow_tf32=*/false, CudaConvWgrad::kCudnn);
    for (const auto& [bytes, what] : kLimits) {
      gemm_.push_back(make_cuda_backend(0, /*allow_tf32=*/false, CudaConvWgrad::kGemm, bytes));
    }
  }
  std::unique_ptr<Backend> cpu_, cudnn_;
  std::vector<std::unique_ptr<Backend>> gemm_;  // one per kLimits entry
};

TEST(CudaConvWgradName, NamesAreParsedAndABadOneIsNamed) {
  EXPECT_EQ(cuda_conv_wgrad_from_name("gemm"), CudaConvWgrad::kGemm);
  EXPECT_EQ(cuda_conv_wgrad_from_name("cudnn"), CudaConvWgrad::kCudnn);
  EXPECT_STREQ(cuda_conv_wgrad_name(CudaConvWgrad::kCudnn), "cudnn");
  try {
    cuda_conv_wgrad_from_name("fft");
    FAIL() << "'fft' was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'fft'"), std::string::npos) << e.what();
  }
}

TEST_F(ConvWgradOnGpu, DescribeNamesTheAlgorithm) {
  EXPECT_NE(gemm_[0]->describe().find("wgrad gemm"), std::string::npos) << gemm_[0]->describe();
  EXPECT_NE(cudnn_->describe().find("wgrad cudnn"), std::string::npos) << cudnn_->describe();
}

// Every chunking against the CPU (im2col + OpenBLAS GEMM) within the sum-rounding model, and cuDNN's weight gradient
// within the same model: a wrong index, padding cell, chunk offset or beta would be off by whole terms.
TEST_F(ConvWgradOnGpu, GemmMatchesTheCpuAndCudnnInEveryChunking) {
  uint64_t seed = 500;
  for (const Case& c : kCases) {
    const Inputs in = inputs_of(c, seed);
    seed += 3;
    const ConvShape& s = in.s;
    const std::string name = name_of(c);
    const std::vector<float> ref = weight_gradient(*cpu_, s, in.x, in.w, in.dy);
    // Each dw is a sum of products: the same gradient of the absolute values gives each one's sum|terms|.
    const std::vector<float> magnitude = weight_gradient(*cpu_, s, absolute(in.x), absolute(in.w), absolute(in.dy));
    for (size_t i = 0; i < kLimits.size(); ++i) {
      expect_within_sum_rounding(ref, weight_gradient(*gemm_[i], s, in.x, in.w, in.dy), magnitude,
                                 name + " dw, gemm in " + kLimits[i].second);
    }
    expect_within_sum_rounding(ref, weight_gradient(*cudnn_, s, in.x, in.w, in.dy), magnitude, name + " dw, cudnn");
  }
}

TEST_F(ConvWgradOnGpu, GemmAgreesWithCudnnWithinSumRounding) {
  uint64_t seed = 700;
  for (const Case& c : kCases) {
    const Inputs in = inputs_of(c, seed);
    seed += 3;
    const std::vector<float> magnitude = weight_gradient(*cpu_, in.s, absolute(in.x), absolute(in.w), absolute(in.dy));
    expect_within_sum_rounding(weight_gradient(*cudnn_, in.s, in.x, in.w, in.dy),
                               weight_gradient(*gemm_[1], in.s, in.x, in.w, in.dy), magnitude,
                               name_of(c) + " dw, gemm (4 MiB chunks) against cudnn");
  }
}

// Sync training must be deterministic: the same inputs give the same bits, run after run, in every chunking (here
// with other layers' work in between, which reuses the workspace).
TEST_F(ConvWgradOnGpu, GemmIsBitwiseRepeatable) {
  uint64_t seed = 900;
  for (const Case& c : kCases) {
    const Inputs in = inputs_of(c, seed);
    seed += 3;
    for (size_t i = 0; i < kLimits.size(); ++i) {
      const std::vector<float> first = weight_gradient(*gemm_[i], in.s, in.x, in.w, in.dy);
      const Inputs other = inputs_of(kCases[0], seed + 1000);
      weight_gradient(*gemm_[i], other.s, other.x, other.w, other.dy);
      EXPECT_EQ(first, weight_gradient(*gemm_[i], in.s, in.x, in.w, in.dy))
          << name_of(c) << ", gemm in " << kLimits[i].second << ": two runs on the same inputs differ";
    }
  }
}

}  // namespace
}  // namespace pshard::models
