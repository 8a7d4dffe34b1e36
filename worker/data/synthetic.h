// Synthetic data sets: linear regression with known weights, and labelled random images for throughput runs.
#pragma once

#include <cstdint>
#include <vector>

#include "worker/data/dataset.h"
#include "worker/data/random.h"

namespace pshard::data {

// Sizes used when data.train_size / data.test_size are 0.
constexpr int64_t kSyntheticRegressionTrain = 10000, kSyntheticRegressionTest = 2000;
constexpr int64_t kSyntheticImagesTrain = 10000, kSyntheticImagesTest = 2000;

// The true model of the synthetic regression: y = x.w + b + noise.
struct SyntheticRegression {
  std::vector<float> w;  // `features` weights, each ~ N(0, 1)
  float b = 0;           // ~ N(0, 1)
};

// The true (w, b) for a seed; the same values make_synthetic_regression uses,
// so a test can check that a trained linreg recovers them:
//   SyntheticRegression truth = synthetic_regression_truth(10, cfg.get_int("run.seed"));
SyntheticRegression synthetic_regression_truth(int64_t features, uint64_t seed);

// Train and test sets with x ~ N(0, 1) (independent features) and
// y = x.w + b + N(0, noise^2), target_dim 1, sample_shape {features}.
// Deterministic in (seed, sizes, features, noise) on every platform.
DataSplits make_synthetic_regression(int64_t train_size, int64_t test_size, int64_t features, double noise,
                                     uint64_t seed);

// Labelled images of shape {C, H, W}: class k has a fixed random template
// t_k (pixels ~ N(0, 1)); a sample is 0.5 * t_k + uniform noise in [-1, 1],
// so a model can learn the classes while the data costs nothing to read.
// Labels are uniform at random; deterministic in the seed.
DataSplits make_synthetic_images(int64_t train_size, int64_t test_size, const std::vector<int64_t>& shape,
                                 int64_t classes, uint64_t seed);

}  // namespace pshard::data
