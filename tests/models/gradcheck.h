// Test helpers: standalone layers with bound parameters, and central-difference gradient checks.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "models/backend.h"
#include "models/layer.h"
#include "models/tensor.h"

namespace pshard::models::testing {

inline std::vector<int64_t> batched(int64_t n, const std::vector<int64_t>& shape) {
  std::vector<int64_t> s = {n};
  s.insert(s.end(), shape.begin(), shape.end());
  return s;
}

inline std::vector<float> random_vector(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Values that are distinct and at least `gap` apart from each other and from 0, in random order (keeps ReLU and
// max-pooling away from their kinks during finite differences).
inline std::vector<float> spaced_vector(size_t n, uint32_t seed, float gap = 0.05f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    float k = static_cast<float>(i) - static_cast<float>(n) / 2.0f;
    v[i] = (k >= 0 ? k + 0.5f : k - 0.5f) * gap;
  }
  std::mt19937 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

// A layer's parameters in host vectors, bound to the layer.
struct BoundParams {
  std::vector<std::vector<float>> values, grads;
  std::vector<std::string> names;
  BoundParams(Layer& layer, uint32_t seed) {
    std::vector<float*> v, g;
    for (const ParamDecl& d : layer.param_decls()) {
      int64_t n = shape_numel(d.shape);
      // Random values, also for BatchNorm's gamma/beta, so that the check does not sit at gamma = 1.
      values.push_back(random_vector(n, seed++, -1.0f, 1.0f));
      if (d.name.find("weight") != std::string::npos && d.init == ParamDecl::Init::kConstant) {
        for (float& x : values.back()) x = 0.5f + std::fabs(x);  // gamma away from 0
      }
      grads.push_back(std::vector<float>(n, 0.0f));
      names.push_back(d.name);
    }
    for (size_t i = 0; i < values.size(); ++i) {
      v.push_back(values[i].data());
      g.push_back(grads[i].data());
    }
    layer.bind_params(v, g);
  }
};

// Compares the analytic gradient of L = sum(y * r) (r fixed, random) for a layer with central differences,
// for the input and every parameter element.
struct GradCheckOptions {
  float step = 1e-2f;
  double atol = 2e-3, rtol = 2e-2;
  bool train = true;
  bool check_input = true;
};

inline double weighted_sum(const std::vector<float>& y, const std::vector<float>& r) {
  double s = 0.0;
  for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * r[i];
  return s;
}

inline void expect_close(double analytic, double numeric, const GradCheckOptions& o, const std::string& what) {
  const double tol = o.atol + o.rtol * std::max(std::fabs(analytic), std::fabs(numeric));
  EXPECT_NEAR(analytic, numeric, tol) << what;
}

// `before_forward` runs before each forward (e.g. to replay a dropout mask).
inline void check_layer_gradients(Layer& layer, Backend& /*backend*/, int64_t n, std::vector<float> x,
                                  const GradCheckOptions& o, uint32_t seed,
                                  const std::function<void()>& before_forward = {}) {
  BoundParams params(layer, seed);
  const std::vector<int64_t> xs = batched(n, layer.input_shape()), ys = batched(n, layer.output_shape());
  ASSERT_EQ(static_cast<int64_t>(x.size()), shape_numel(xs));
  std::vector<float> y(shape_numel(ys)), r = random_vector(y.size(), seed + 1000), dx(x.size(), 0.0f);
  auto loss = [&]() {
    if (before_forward) before_forward();
    layer.forward(Tensor::view(x.data(), xs), Tensor::view(y.data(), ys), o.train);
    return weighted_sum(y, r);
  };
  loss();
  Tensor dxt = Tensor::view(dx.data(), xs);
  layer.backward(Tensor::view(x.data(), xs), Tensor::view(y.data(), ys), Tensor::view(r.data(), ys), &dxt);
  const std::vector<float> dx_analytic = dx;
  const double center = loss();
  int64_t checked = 0, kinks = 0;
  // Where the one-sided differences disagree, the step crossed a kink (ReLU, max): skipped, at most 10%.
  auto check_one = [&](double analytic, double up, double mid, double down, const std::string& what) {
    ++checked;
    const double numeric = (up - down) / (2.0 * o.step);
    const double tol = o.atol + o.rtol * std::max(std::fabs(analytic), std::fabs(numeric));
    if (std::fabs((up - mid) / o.step - (mid - down) / o.step) > 2 * tol) {
      ++kinks;
      return;
    }
    expect_close(analytic, numeric, o, what);
  };
  std::vector<std::vector<float>> dp_analytic = params.grads;
  if (o.check_input) {
    for (size_t i = 0; i < x.size(); ++i) {
      const float keep = x[i];
      x[i] = keep + o.step;
      const double up = loss();
      x[i] = keep - o.step;
      const double down = loss();
      x[i] = keep;
      check_one(dx_analytic[i], up, center, down, std::string(layer.type()) + " d input[" + std::to_string(i) + "]");
    }
  }
  for (size_t p = 0; p < params.values.size(); ++p) {
    std::vector<float>& v = params.values[p];
    for (size_t i = 0; i < v.size(); ++i) {
      const float keep = v[i];
      v[i] = keep + o.step;
      const double up = loss();
      v[i] = keep - o.step;
      const double down = loss();
      v[i] = keep;
      check_one(dp_analytic[p][i], up, center, down,
                std::string(layer.type()) + " d " + params.names[p] + "[" + std::to_string(i) + "]");
    }
  }
  std::printf("gradcheck %s: %lld elements, %lld skipped at kinks\n", layer.type(), static_cast<long long>(checked),
              static_cast<long long>(kinks));
  EXPECT_LE(kinks * 10, checked) << layer.type() << ": " << kinks << " of " << checked << " elements sit on a kink";
}

}  // namespace pshard::models::testing
