// Synthetic data: regression statistics and recoverable (w, b); labelled images.
#include "worker/data/synthetic.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/config/config.h"

namespace pshard::data {
namespace {

// Least squares for [X 1] beta = y by the normal equations (Gauss-Jordan).
std::vector<double> least_squares(const Dataset& d) {
  int64_t f = d.sample_elems(), k = f + 1;
  std::vector<double> a(static_cast<size_t>(k * (k + 1)), 0.0);  // augmented [A^T A | A^T y]
  for (int64_t i = 0; i < d.size(); ++i) {
    std::vector<double> row(static_cast<size_t>(k), 1.0);
    for (int64_t j = 0; j < f; ++j) row[static_cast<size_t>(j)] = d.sample(i)[j];
    for (int64_t r = 0; r < k; ++r) {
      for (int64_t c = 0; c < k; ++c) a[static_cast<size_t>(r * (k + 1) + c)] += row[r] * row[c];
      a[static_cast<size_t>(r * (k + 1) + k)] += row[r] * d.targets[static_cast<size_t>(i)];
    }
  }
  for (int64_t p = 0; p < k; ++p) {
    double piv = a[static_cast<size_t>(p * (k + 1) + p)];
    for (int64_t c = 0; c <= k; ++c) a[static_cast<size_t>(p * (k + 1) + c)] /= piv;
    for (int64_t r = 0; r < k; ++r) {
      if (r == p) continue;
      double m = a[static_cast<size_t>(r * (k + 1) + p)];
      for (int64_t c = 0; c <= k; ++c)
        a[static_cast<size_t>(r * (k + 1) + c)] -= m * a[static_cast<size_t>(p * (k + 1) + c)];
    }
  }
  std::vector<double> beta(static_cast<size_t>(k));
  for (int64_t r = 0; r < k; ++r) beta[static_cast<size_t>(r)] = a[static_cast<size_t>(r * (k + 1) + k)];
  return beta;
}

TEST(SyntheticRegression, StatisticsAndRecoverableTruth) {
  Config cfg = Config::defaults();
  cfg.set("data.name=synthetic-regression");
  cfg.set("data.features=5");
  cfg.set("data.noise=0.1");
  cfg.set("data.train_size=20000");
  cfg.set("data.test_size=100");
  cfg.set("run.seed=42");
  DataSplits s = load_data(cfg);
  ASSERT_EQ(s.train.size(), 20000);
  ASSERT_EQ(s.test.size(), 100);
  EXPECT_EQ(s.train.sample_shape, (std::vector<int64_t>{5}));
  EXPECT_EQ(s.train.num_classes, 0);
  EXPECT_EQ(s.train.target_dim, 1);
  ASSERT_EQ(s.train.targets.size(), 20000u);

  // x ~ N(0, 1): per-feature mean and variance (5 sigma bounds for n = 20000).
  for (int64_t j = 0; j < 5; ++j) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < 20000; ++i) {
      sum += s.train.sample(i)[j];
      sq += s.train.sample(i)[j] * s.train.sample(i)[j];
    }
    EXPECT_NEAR(sum / 20000, 0.0, 5 / std::sqrt(20000.0)) << j;
    EXPECT_NEAR(sq / 20000, 1.0, 5 * std::sqrt(2.0 / 20000)) << j;
  }

  SyntheticRegression truth = synthetic_regression_truth(5, 42);
  ASSERT_EQ(truth.w.size(), 5u);
  std::vector<double> beta = least_squares(s.train);
  for (size_t j = 0; j < 5; ++j) EXPECT_NEAR(beta[j], truth.w[j], 0.005) << j;
  EXPECT_NEAR(beta[5], truth.b, 0.005);

  // Residuals have the configured noise std.
  double sq = 0;
  for (int64_t i = 0; i < 20000; ++i) {
    double pred = truth.b;
    for (size_t j = 0; j < 5; ++j) pred += truth.w[j] * s.train.sample(i)[j];
    double r = s.train.targets[static_cast<size_t>(i)] - pred;
    sq += r * r;
  }
  EXPECT_NEAR(std::sqrt(sq / 20000), 0.1, 0.005);

  // Deterministic in the seed; another seed gives other weights.
  DataSplits again = load_data(cfg);
  EXPECT_EQ(again.train.features, s.train.features);
  EXPECT_EQ(again.test.targets, s.test.targets);
  EXPECT_NE(synthetic_regression_truth(5, 43).w, truth.w);
  EXPECT_NE(s.train.features, std::vector<float>(s.train.features.size(), 0.0f));
}

TEST(SyntheticImages, ShapeLabelsAndClassSignal) {
  DataSplits s = make_synthetic_images(2000, 500, {3, 8, 8}, 4, 7);
  ASSERT_EQ(s.train.size(), 2000);
  ASSERT_EQ(s.test.size(), 500);
  EXPECT_EQ(s.train.num_classes, 4);
  std::vector<int> counts(4);
  for (int32_t y : s.train.labels) {
    ASSERT_GE(y, 0);
    ASSERT_LT(y, 4);
    counts[static_cast<size_t>(y)]++;
  }
  for (int c : counts) EXPECT_NEAR(c, 500, 100);
  // Nearest class mean (from the train split) classifies the test split well:
  // the classes carry signal a model can learn.
  int64_t e = s.train.sample_elems();
  std::vector<double> means(static_cast<size_t>(4 * e), 0.0);
  for (int64_t i = 0; i < 2000; ++i) {
    for (int64_t j = 0; j < e; ++j)
      means[static_cast<size_t>(s.train.labels[i] * e + j)] += s.train.sample(i)[j] / counts[s.train.labels[i]];
  }
  int correct = 0;
  for (int64_t i = 0; i < 500; ++i) {
    int best = -1;
    double best_d = 1e300;
    for (int c = 0; c < 4; ++c) {
      double d = 0;
      for (int64_t j = 0; j < e; ++j) d += std::pow(s.test.sample(i)[j] - means[static_cast<size_t>(c * e + j)], 2);
      if (d < best_d) best_d = d, best = c;
    }
    correct += best == s.test.labels[static_cast<size_t>(i)];
  }
  EXPECT_GT(correct, 450);
  EXPECT_EQ(make_synthetic_images(10, 5, {3, 8, 8}, 4, 7).train.features,
            std::vector<float>(s.train.features.begin(), s.train.features.begin() + 10 * e));
}

}  // namespace
}  // namespace pshard::data
