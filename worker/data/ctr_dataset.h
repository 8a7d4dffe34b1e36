// Click-through-rate samples (dense floats, categorical ids, 0/1 labels) and the bound of their true probabilities.
//
// The data of recommendation models such as DLRM: each sample has `num_dense` float features and
// `num_fields` categorical features, one uint64 id per field, looked up in that field's embedding
// table. synthetic_ctr.h makes such data with a known click probability; criteo.h reads
// Criteo's display-ads text files.
//
//   SyntheticCtrOptions o;                  // synthetic_ctr.h
//   o.samples = 100000;
//   CtrDataset d = make_synthetic_ctr(o);
//   const uint64_t* ids = d.id_row(7);      // d.num_fields ids of sample 7
//   const float* x = d.dense_row(7);        // d.num_dense floats
//   float clicked = d.labels[7];            // 0 or 1
//   CtrBound b = ctr_bound(d);              // b.auc: the best AUC any model can expect
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "worker/data/dataset.h"

namespace pshard::data {

struct CtrDataset {
  std::string name;  // "synthetic-ctr", "criteo"
  int64_t num_dense = 0;
  int64_t num_fields = 0;
  std::vector<float> dense;   // size() * num_dense, row-major
  std::vector<uint64_t> ids;  // size() * num_fields, row-major
  std::vector<float> labels;  // size() entries, each 0 or 1
  // num_fields entries: field f's ids lie in [0, cardinality[f]); 0 = hashed or unbounded (any uint64).
  std::vector<uint64_t> cardinality;
  // The true click probability of each sample when the data's maker knows it (synthetic-ctr:
  // size() entries); empty for data read from files.
  std::vector<float> click_prob;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  const float* dense_row(int64_t i) const { return dense.data() + i * num_dense; }
  const uint64_t* id_row(int64_t i) const { return ids.data() + i * num_fields; }
  // Error (naming `where`) when the vectors' sizes disagree with size(), num_dense and num_fields,
  // a label is not 0 or 1, or an id is not below its field's nonzero cardinality.
  void check_consistent(const std::string& where) const;
};

// What the true click probabilities achieve on the data's own labels: no model of the features
// can expect a better AUC or a lower log loss (up to the sampling noise of the labels).
struct CtrBound {
  double auc = 0;                // AUC of click_prob on labels (the generator's bound)
  double log_loss = 0;           // mean log loss of click_prob (the Bayes log loss)
  double constant_log_loss = 0;  // log loss of predicting label_rate for every sample
  double label_rate = 0;         // fraction of samples labelled 1
  double mean_click_prob = 0;    // mean of click_prob (label_rate's expectation)
};

// The bound of a data set that has click_prob; Error when it has none (data read from a file).
// An AUC of NaN means the labels hold a single class (see common/metrics/ctr_metrics.h).
CtrBound ctr_bound(const CtrDataset& d);

// The samples as a Dataset of two classes (label 1: a click) whose features are the dense ones and whose ids are the
// categorical ones, one table of cardinality[f] rows per field: what load_data gives the trainer. Takes the vectors.
Dataset ctr_as_dataset(CtrDataset&& d);

}  // namespace pshard::data
