// Exact ROC AUC (average ranks for ties) and clamped log loss of binary predictions.
#include "common/metrics/ctr_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"

namespace pshard {

namespace {

// 1 for a positive, 0 for a negative; Error for anything else.
bool is_positive(const float* labels, size_t i, const char* what) {
  if (labels[i] == 1.0f) return true;
  if (labels[i] == 0.0f) return false;
  std::ostringstream msg;
  msg << what << ": label of sample " << i << " is " << labels[i] << ", expected 0 or 1";
  throw Error(msg.str());
}

void check_not_nan(const float* values, size_t i, const char* what, const char* name) {
  if (std::isnan(values[i])) {
    throw Error(std::string(what) + ": " + name + " of sample " + std::to_string(i) + " is NaN");
  }
}

}  // namespace

double auc(const float* scores, const float* labels, size_t n) {
  uint64_t positives = 0;
  for (size_t i = 0; i < n; ++i) {
    positives += is_positive(labels, i, "auc") ? 1 : 0;
    check_not_nan(scores, i, "auc", "score");
  }
  uint64_t negatives = n - positives;
  if (positives == 0 || negatives == 0) return std::numeric_limits<double>::quiet_NaN();

  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [scores](size_t a, size_t b) { return scores[a] < scores[b]; });

  // Ranks are 1-based; a run of equal scores at sorted positions [begin, end) shares the rank
  // (begin + 1 + end) / 2. Twice the positives' rank sum is then an integer, summed exactly.
  uint64_t twice_rank_sum = 0;
  for (size_t begin = 0; begin < n;) {
    size_t end = begin + 1;
    while (end < n && scores[order[end]] == scores[order[begin]]) ++end;
    uint64_t run_positives = 0;
    for (size_t k = begin; k < end; ++k) run_positives += labels[order[k]] == 1.0f ? 1 : 0;
    twice_rank_sum += run_positives * (begin + 1 + end);
    begin = end;
  }
  // U = rank sum - P (P + 1) / 2; AUC = U / (P N).
  double twice_u = static_cast<double>(twice_rank_sum - positives * (positives + 1));
  return twice_u / (2.0 * static_cast<double>(positives) * static_cast<double>(negatives));
}

double log_loss(const float* probs, const float* labels, size_t n) {
  if (n == 0) return std::numeric_limits<double>::quiet_NaN();
  constexpr double kEps = 1e-7;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    bool positive = is_positive(labels, i, "log_loss");
    check_not_nan(probs, i, "log_loss", "probability");
    double p = std::clamp(static_cast<double>(probs[i]), kEps, 1.0 - kEps);
    sum -= positive ? std::log(p) : std::log1p(-p);
  }
  return sum / static_cast<double>(n);
}

}  // namespace pshard
