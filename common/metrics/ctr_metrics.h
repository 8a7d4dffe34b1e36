// Metrics of click predictions (binary labels): exact ROC AUC and clamped log loss.
//
//   std::vector<float> p = model_probabilities(...), y = labels(...);   // y[i] is 0 or 1
//   double a = pshard::auc(p.data(), y.data(), p.size());        // 0.5 = no better than chance
//   double ll = pshard::log_loss(p.data(), y.data(), p.size());  // nats per sample
//
// Both are computed in double precision over the whole set (no sampling, no binning), so two runs
// over the same predictions give the same bits.
#pragma once

#include <cstddef>

namespace pshard {

// The area under the ROC curve: the probability that a random positive scores above a random
// negative, a tie counting 1/2. Exact: samples are sorted by score and tied scores share their
// average rank (the Mann-Whitney U statistic divided by positives x negatives); O(n log n).
// Only the order of the scores matters, so scores may be probabilities or logits.
// Returns NaN when the labels hold no positive or no negative (n == 0 included): the AUC is then
// undefined, and a caller shows it as such rather than as a number.
// Error when a label is not 0 or 1 or a score is NaN, naming the sample's index.
double auc(const float* scores, const float* labels, size_t n);

// The mean binary cross-entropy -[y log p + (1 - y) log(1 - p)] in nats, each probability first
// clamped to [1e-7, 1 - 1e-7] so that a confident wrong prediction costs at most ~16.1 instead of
// infinity. Returns NaN when n == 0. Error when a label is not 0 or 1 or a probability is NaN.
double log_loss(const float* probs, const float* labels, size_t n);

}  // namespace pshard
