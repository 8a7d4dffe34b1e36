// Helpers of the GPU tests: skip without a GPU, device arrays, random inputs, CPU-vs-GPU comparison.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "models/backend.h"
#include "models/device.h"

// Skips the calling test when no CUDA device is usable (always the case on a build without CUDA).
#define PSHARD_REQUIRE_GPU()                                                           \
  do {                                                                                 \
    if (::pshard::models::cuda_device_count() == 0) {                                  \
      GTEST_SKIP() << "no CUDA device: " << ::pshard::models::describe_cuda_devices(); \
    }                                                                                  \
  } while (0)

namespace pshard::models::gpu_test {

inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A float array in backend memory, filled from and read back to the host.
class Array {
 public:
  Array(Backend& b, const std::vector<float>& host) : b_(b), n_(host.size()) {
    p_ = static_cast<float*>(b_.allocate(bytes() + sizeof(float)));  // never 0 bytes
    if (n_ > 0) b_.upload(p_, host.data(), bytes());
  }
  Array(Backend& b, size_t n, float value = 0.0f) : Array(b, std::vector<float>(n, value)) {}
  Array(Backend& b, const std::vector<int32_t>& labels) : Array(b, labels.size()) {
    b_.upload(p_, labels.data(), labels.size() * sizeof(int32_t));
  }
  ~Array() { b_.deallocate(p_); }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;

  float* get() const { return p_; }
  int32_t* as_int() const { return reinterpret_cast<int32_t*>(p_); }
  std::vector<float> host() const {
    std::vector<float> v(n_);
    if (n_ > 0) b_.download(v.data(), p_, bytes());
    return v;
  }

 private:
  size_t bytes() const { return n_ * sizeof(float); }  // labels (int32) reuse the float width
  Backend& b_;
  size_t n_;
  float* p_ = nullptr;
};

// EXPECTs |got[i] - ref[i]| <= allowed(i) for every element (NaN never passes) and reports how many differ and the
// worst, with `tolerance(i)` describing what was allowed there.
inline std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

template <typename Allowed, typename Describe>
void expect_each_within(const std::vector<float>& ref, const std::vector<float>& got, const std::string& what,
                        Allowed allowed, Describe tolerance) {
  ASSERT_EQ(ref.size(), got.size()) << what;
  size_t worst = 0, bad = 0;
  double worst_ratio = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double ratio = std::fabs(static_cast<double>(got[i]) - ref[i]) / (allowed(i) + 1e-30);
    if (!(ratio <= 1.0)) ++bad;  // also counts NaN
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << ref.size() << " elements differ; worst at " << worst
                     << ": cpu " << ref[worst] << " gpu " << got[worst] << " (" << worst_ratio << " x the tolerance, "
                     << tolerance(worst) << ")";
}

// EXPECTs |got - ref| <= rtol * (|ref| + floor * max|ref|) element by element. The floor keeps sums that cancel to
// ~0 from demanding an impossible relative accuracy.
inline void expect_close(const std::vector<float>& ref, const std::vector<float>& got, double rtol,
                         const std::string& what, double floor = 1e-3) {
  double scale = 0.0;
  for (float r : ref) scale = std::max(scale, static_cast<double>(std::fabs(r)));
  expect_each_within(
      ref, got, what, [&](size_t i) { return rtol * (std::fabs(ref[i]) + floor * scale); },
      [&](size_t) { return "rtol " + number(rtol) + ", max |cpu| " + number(scale); });
}

inline std::vector<float> absolute(std::vector<float> v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}

// For results that are sums of products (convolutions, GEMMs): EXPECTs |got - ref| <= kUnits * eps * magnitude[i],
// where magnitude[i] is the same sum over the absolute values of the terms (the operation run on |inputs|).
// Both sides sum in fp32 in orders of their own (im2col + GEMM blocks, oneDNN, cuDNN's kernels). Rounding a sum
// of K terms of random sign, added one by one, leaves an error of standard deviation about 0.3 eps * sum|terms|
// (each addition rounds a partial sum of size ~sqrt(k) sigma); blocked and pairwise orders leave less. kUnits = 8
// is over 10 standard deviations of the difference, independent of K and of the data; a wrong or missing term of
// typical size is K / 8 eps times larger than what is allowed.
inline void expect_within_sum_rounding(const std::vector<float>& ref, const std::vector<float>& got,
                                       const std::vector<float>& magnitude, const std::string& what) {
  constexpr double kUnits = 8.0, kEps = 1.1920928955078125e-07;  // FLT_EPSILON
  ASSERT_EQ(ref.size(), magnitude.size()) << what;
  expect_each_within(
      ref, got, what, [&](size_t i) { return kUnits * kEps * magnitude[i]; },
      [&](size_t i) { return number(kUnits) + " eps x sum|terms| = " + number(kUnits * kEps * magnitude[i]); });
}

}  // namespace pshard::models::gpu_test
