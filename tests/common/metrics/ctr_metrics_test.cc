// AUC and log loss of click predictions: hand-computed cases, ties, undefined AUC, bad labels.
#include "common/metrics/ctr_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"

namespace pshard {
namespace {

double auc_of(const std::vector<float>& scores, const std::vector<float>& labels) {
  return auc(scores.data(), labels.data(), scores.size());
}

std::string error_of_auc(const std::vector<float>& scores, const std::vector<float>& labels) {
  try {
    auc_of(scores, labels);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CtrAuc, HandComputedCases) {
  // Positives 0.35, 0.8; negatives 0.1, 0.4: 3 of the 4 pairs are ordered right.
  EXPECT_EQ(auc_of({0.1f, 0.4f, 0.35f, 0.8f}, {0, 0, 1, 1}), 0.75);
  EXPECT_EQ(auc_of({0.1f, 0.2f, 0.3f, 0.4f}, {0, 0, 1, 1}), 1.0);
  EXPECT_EQ(auc_of({0.4f, 0.3f, 0.2f, 0.1f}, {0, 0, 1, 1}), 0.0);
  // Logits work as well as probabilities: only the order counts.
  EXPECT_EQ(auc_of({-3.0f, 2.0f, -1.0f}, {0, 1, 1}), 1.0);
  EXPECT_EQ(auc_of({-3.0f, 2.0f, -1.0f}, {1, 1, 0}), 0.5);
}

TEST(CtrAuc, TiesCountOneHalf) {
  // Positives 0.5, 0.9; negatives 0.1, 0.5: pairs 1 + 1/2 + 1 + 1 = 3.5 of 4.
  EXPECT_EQ(auc_of({0.1f, 0.5f, 0.5f, 0.9f}, {0, 1, 0, 1}), 0.875);
  // Every score equal: every pair is a tie.
  EXPECT_EQ(auc_of({0.5f, 0.5f, 0.5f, 0.5f, 0.5f}, {0, 1, 0, 1, 1}), 0.5);
  // Positives 0.2, 0.2, 0.7; negatives 0.2, 0.1: 0.2 vs 0.2 twice (1/2 each), the rest ordered right,
  // 5 of 6.
  EXPECT_EQ(auc_of({0.2f, 0.2f, 0.7f, 0.2f, 0.1f}, {1, 1, 1, 0, 0}), 5.0 / 6.0);
}

TEST(CtrAuc, EqualsPairCountingWithManyTies) {
  // Scores on a coarse grid (many ties), labels random: the rank formula equals counting every pair.
  uint64_t state = 12345;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 33);
  };
  std::vector<float> scores(3001), labels(3001);
  for (size_t i = 0; i < scores.size(); ++i) {
    scores[i] = static_cast<float>(next() % 17) * 0.25f;
    labels[i] = (next() % 3 == 0) ? 1.0f : 0.0f;
  }
  uint64_t twice_wins = 0, positives = 0, negatives = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (labels[i] != 1.0f) continue;
    ++positives;
    for (size_t j = 0; j < scores.size(); ++j) {
      if (labels[j] != 0.0f) continue;
      twice_wins += scores[i] > scores[j] ? 2 : (scores[i] == scores[j] ? 1 : 0);
    }
  }
  for (float y : labels) negatives += y == 0.0f ? 1 : 0;
  double expected = static_cast<double>(twice_wins) / (2.0 * static_cast<double>(positives * negatives));
  EXPECT_EQ(auc_of(scores, labels), expected);
}

TEST(CtrAuc, UndefinedWithoutBothClassesIsNan) {
  EXPECT_TRUE(std::isnan(auc_of({0.1f, 0.9f, 0.3f}, {1, 1, 1})));
  EXPECT_TRUE(std::isnan(auc_of({0.1f, 0.9f, 0.3f}, {0, 0, 0})));
  EXPECT_TRUE(std::isnan(auc(nullptr, nullptr, 0)));
}

TEST(CtrAuc, RefusesBadLabelsAndNanScores) {
  EXPECT_EQ(error_of_auc({0.1f, 0.2f, 0.3f}, {0, 2, 1}), "auc: label of sample 1 is 2, expected 0 or 1");
  EXPECT_EQ(error_of_auc({0.1f, NAN, 0.3f}, {0, 1, 1}), "auc: score of sample 1 is NaN");
}

TEST(CtrLogLoss, HandComputedValues) {
  std::vector<float> half = {0.5f, 0.5f}, labels = {1, 0};
  EXPECT_DOUBLE_EQ(log_loss(half.data(), labels.data(), 2), 0.6931471805599453);  // ln 2
  // -(ln 0.9 + ln 0.8) / 2 for probabilities 0.9 (label 1) and 0.2 (label 0).
  std::vector<float> p = {0.9f, 0.2f};
  EXPECT_NEAR(log_loss(p.data(), labels.data(), 2), 0.16425203348601, 1e-7);
  // 0.25 on a negative and 0.75 on a positive both cost -ln 0.75.
  std::vector<float> q = {0.25f, 0.75f}, y = {0, 1};
  EXPECT_DOUBLE_EQ(log_loss(q.data(), y.data(), 2), 0.2876820724517809);
}

TEST(CtrLogLoss, ClampsCertainPredictions) {
  // A certain wrong prediction costs -ln 1e-7, a certain right one -ln(1 - 1e-7).
  std::vector<float> p = {0.0f, 1.0f}, wrong = {1, 0}, right = {0, 1};
  EXPECT_NEAR(log_loss(p.data(), wrong.data(), 2), 16.11809565095832, 1e-9);
  EXPECT_NEAR(log_loss(p.data(), right.data(), 2), 1.00000005e-7, 1e-13);
}

TEST(CtrLogLoss, EmptyIsNanAndBadInputIsRefused) {
  EXPECT_TRUE(std::isnan(log_loss(nullptr, nullptr, 0)));
  std::vector<float> p = {0.5f, NAN}, y = {0, 1}, bad = {0, 0.5f};
  try {
    log_loss(p.data(), y.data(), 2);
    ADD_FAILURE() << "NaN probability accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "log_loss: probability of sample 1 is NaN");
  }
  try {
    log_loss(y.data(), bad.data(), 2);
    ADD_FAILURE() << "label 0.5 accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "log_loss: label of sample 1 is 0.5, expected 0 or 1");
  }
}

}  // namespace
}  // namespace pshard
