// The CUDA backend's im2col for the GEMM weight gradient (cuda::im2col_rows) against a plain host loop, element for
// element and exactly: a wrong index, padding cell or tile edge shows here as such, not only through the GEMM's sum
// (skipped without a GPU).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "models/backend.h"
#include "models/cuda/check.h"
#include "models/cuda/kernels.h"
#include "tests/models/gpu/gpu_compare.h"

namespace pshard::models::cuda {
namespace {

using gpu_test::random_floats;

// A device buffer of floats (cudaMalloc'ed; the kernel under test needs nothing of a backend).
class DeviceFloats {
 public:
  explicit DeviceFloats(size_t n) : n_(n) { PSHARD_CUDA_CHECK(cudaMalloc(&p_, n * sizeof(float))); }
  ~DeviceFloats() { cudaFree(p_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;

  float* get() const { return p_; }
  void upload(const std::vector<float>& v) {
    PSHARD_CUDA_CHECK(cudaMemcpy(p_, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  std::vector<float> host() const {
    std::vector<float> v(n_);
    PSHARD_CUDA_CHECK(cudaMemcpy(v.data(), p_, n_ * sizeof(float), cudaMemcpyDeviceToHost));
    return v;
  }

 private:
  size_t n_;
  float* p_ = nullptr;
};

// cols[(n, p), (c, r, q)] of samples [n0, n0 + nb) of x, as kernels.h defines it: the loops written out.
std::vector<float> host_im2col(const ConvShape& s, const std::vector<float>& x, int64_t n0, int64_t nb) {
  const int64_t p_count = s.h_out * s.w_out, crs = s.c_in * s.kh * s.kw;
  std::vector<float> cols(static_cast<size_t>(nb * p_count * crs));
  for (int64_t n = 0; n < nb; ++n) {
    for (int64_t oh = 0; oh < s.h_out; ++oh) {
      for (int64_t ow = 0; ow < s.w_out; ++ow) {
        const int64_t row = n * p_count + oh * s.w_out + ow;
        for (int64_t c = 0; c < s.c_in; ++c) {
          for (int64_t r = 0; r < s.kh; ++r) {
            for (int64_t q = 0; q < s.kw; ++q) {
              const int64_t ih = oh * s.stride - s.pad + r, iw = ow * s.stride - s.pad + q;
              const bool inside = ih >= 0 && ih < s.h && iw >= 0 && iw < s.w;
              cols[row * crs + (c * s.kh + r) * s.kw + q] =
                  inside ? x[(((n0 + n) * s.c_in + c) * s.h + ih) * s.w + iw] : 0.0f;
            }
          }
        }
      }
    }
  }
  return cols;
}

struct Geometry {
  int64_t n, c, h, w, k, stride, pad;
  int64_t n0, nb;  // the samples im2col_rows is given, as a chunk of conv2d_wgrad_gemm
  std::string why;
};

// The kernel moves 32 x 32 tiles of cols; these cover the edges of that scheme.
const std::vector<Geometry> kGeometries = {
    {4, 16, 32, 32, 3, 1, 1, 0, 4, "ResNet-20's first stage: one output row per tile, 4.5 column tiles"},
    {3, 16, 32, 32, 3, 2, 1, 0, 3, "stride 2 with padding (the stage transition)"},
    {3, 5, 7, 9, 3, 1, 1, 0, 3, "P = 63 and C*KH*KW = 45: tiles span samples, remainders in both directions"},
    {5, 7, 13, 10, 3, 2, 1, 1, 3, "stride 2, odd sizes, a chunk starting at sample 1 and ending before the last"},
    {2, 40, 6, 6, 3, 1, 1, 0, 2, "12 column tiles, the last of 8 columns"},
    {3, 2, 5, 40, 3, 1, 0, 0, 3, "w_out = 38: a tile holds parts of two output rows; C*KH*KW = 18 < one tile"},
    {3, 24, 9, 7, 1, 2, 0, 0, 3, "1x1 stride 2 (a projection shortcut), odd sizes"},
    {3, 4, 8, 8, 5, 2, 2, 1, 1, "5x5 stride 2 padding 2, one sample from the middle"},
    {1, 3, 7, 5, 3, 2, 1, 0, 1, "batch 1"},
    {2, 3, 2, 2, 3, 1, 1, 0, 2, "a kernel larger than the image: mostly padding"},
    {1, 1, 1, 1, 1, 1, 0, 0, 1, "a single element"},
    {64, 16, 32, 32, 3, 1, 1, 0, 64, "10240 tiles: more than the grid's blocks, so blocks loop over tiles"},
};

TEST(CudaIm2col, MatchesAHostLoopExactly) {
  PSHARD_REQUIRE_GPU();
  uint64_t seed = 1100;
  for (const Geometry& g : kGeometries) {
    const ConvShape s = ConvShape::make(g.n, g.c, g.h, g.w, /*c_out=*/1, g.k, g.stride, g.pad);
    const std::string name = "n" + std::to_string(g.n) + " c" + std::to_string(g.c) + " " + std::to_string(g.h) + "x" +
                             std::to_string(g.w) + " k" + std::to_string(g.k) + " s" + std::to_string(g.stride) + " p" +
                             std::to_string(g.pad) + " samples [" + std::to_string(g.n0) + ", " +
                             std::to_string(g.n0 + g.nb) + ") (" + g.why + ")";
    const std::vector<float> x = random_floats(s.n * s.c_in * s.h * s.w, seed++);
    const std::vector<float> want = host_im2col(s, x, g.n0, g.nb);
    // Every float of cols starts as NaN (all bits set), never equal to anything: an element the kernel leaves
    // unwritten fails, and the guard behind the matrix must stay NaN.
    constexpr size_t kGuard = 64;
    DeviceFloats xd(x.size()), cols(want.size() + kGuard);
    xd.upload(x);
    PSHARD_CUDA_CHECK(cudaMemset(cols.get(), 0xff, (want.size() + kGuard) * sizeof(float)));
    im2col_rows(s, xd.get() + g.n0 * s.c_in * s.h * s.w, g.nb, cols.get(), /*stream=*/0);
    PSHARD_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> got = cols.host();

    const int64_t crs = s.c_in * s.kh * s.kw;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (!(got[i] == want[i]) && bad++ == 0) first = i;
    }
    EXPECT_EQ(bad, 0u) << name << ": " << bad << " of " << want.size() << " elements differ; the first at row "
                       << first / crs << ", column " << first % crs << ": " << got[first] << " instead of "
                       << want[first];
    size_t overwritten = 0;
    for (size_t i = want.size(); i < got.size(); ++i) {
      uint32_t bits = 0;
      std::memcpy(&bits, &got[i], sizeof bits);
      if (bits != 0xffffffffu) ++overwritten;
    }
    EXPECT_EQ(overwritten, 0u) << name << ": the kernel wrote " << overwritten << " floats past the matrix";
  }
}

}  // namespace
}  // namespace pshard::models::cuda
