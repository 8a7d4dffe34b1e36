// Click-through-rate samples: consistency checks and the bound of the true click probabilities.
#include "worker/data/ctr_dataset.h"

#include <utility>
#include <vector>

#include "common/error.h"
#include "common/metrics/ctr_metrics.h"

namespace pshard::data {

void CtrDataset::check_consistent(const std::string& where) const {
  const size_t n = labels.size();
  auto fail = [&where](const std::string& what) { throw Error(where + ": " + what); };
  if (num_dense < 0 || num_fields < 0) fail("negative num_dense or num_fields");
  if (dense.size() != n * static_cast<size_t>(num_dense)) {
    fail(std::to_string(dense.size()) + " dense values for " + std::to_string(n) + " samples of " +
         std::to_string(num_dense));
  }
  if (ids.size() != n * static_cast<size_t>(num_fields)) {
    fail(std::to_string(ids.size()) + " ids for " + std::to_string(n) + " samples of " + std::to_string(num_fields) +
         " fields");
  }
  if (cardinality.size() != static_cast<size_t>(num_fields)) {
    fail(std::to_string(cardinality.size()) + " cardinalities for " + std::to_string(num_fields) + " fields");
  }
  if (!click_prob.empty() && click_prob.size() != n) {
    fail(std::to_string(click_prob.size()) + " click probabilities for " + std::to_string(n) + " samples");
  }
  for (size_t i = 0; i < n; ++i) {
    if (labels[i] != 0.0f && labels[i] != 1.0f) fail("label of sample " + std::to_string(i) + " is not 0 or 1");
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    uint64_t card = cardinality[i % static_cast<size_t>(num_fields)];
    if (card != 0 && ids[i] >= card) {
      fail("sample " + std::to_string(i / static_cast<size_t>(num_fields)) + " field " +
           std::to_string(i % static_cast<size_t>(num_fields)) + ": id " + std::to_string(ids[i]) + " >= cardinality " +
           std::to_string(card));
    }
  }
}

CtrBound ctr_bound(const CtrDataset& d) {
  if (d.click_prob.empty()) {
    throw Error("ctr_bound: " + d.name + " has no true click probabilities (only synthetic data has them)");
  }
  d.check_consistent("ctr_bound: " + d.name);
  const size_t n = d.labels.size();
  CtrBound b;
  b.auc = pshard::auc(d.click_prob.data(), d.labels.data(), n);
  b.log_loss = pshard::log_loss(d.click_prob.data(), d.labels.data(), n);
  double positives = 0, prob_sum = 0;
  for (size_t i = 0; i < n; ++i) {
    positives += d.labels[i];
    prob_sum += d.click_prob[i];
  }
  b.label_rate = n == 0 ? 0.0 : positives / static_cast<double>(n);
  b.mean_click_prob = n == 0 ? 0.0 : prob_sum / static_cast<double>(n);
  std::vector<float> constant(n, static_cast<float>(b.label_rate));
  b.constant_log_loss = pshard::log_loss(constant.data(), d.labels.data(), n);
  return b;
}

Dataset ctr_as_dataset(CtrDataset&& d) {
  Dataset out;
  out.name = d.name;
  out.sample_shape = {d.num_dense};
  out.num_classes = 2;
  out.labels.resize(d.labels.size());
  for (size_t i = 0; i < d.labels.size(); ++i) out.labels[i] = d.labels[i] > 0.5f ? 1 : 0;
  // Moved, not copied: a worker holds the whole training split, and a copy would double its peak memory.
  out.features = std::move(d.dense);
  out.id_fields = d.num_fields;
  out.ids = std::move(d.ids);
  out.table_rows = std::move(d.cardinality);
  out.click_prob = std::move(d.click_prob);
  return out;
}

}  // namespace pshard::data
