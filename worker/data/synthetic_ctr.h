// synthetic-ctr: click data with Zipf-distributed categorical ids and labels drawn from a hidden factor model.
//
// Each field's id is Zipf-distributed over its cardinality (id 0 the most frequent, id k-1 drawn
// with probability proportional to k^-zipf_exponent), dense features are N(0, 1), and the label is
// Bernoulli(sigmoid(logit)) with
//
//   logit = intercept
//         + 1/sqrt(F)             * sum_f b(f, id_f)                       (per-id biases)
//         + 1/sqrt(K F (F-1) / 2) * sum_{f<g} <v(f, id_f), v(g, id_g)>     (pairwise interactions)
//         + 0.5/sqrt(D)           * sum_j w_j x_j                          (dense features)
//
// for F fields, D dense features and K-dimensional hidden factors. b, every component of v and
// w_j are uniform on [-sqrt 3, sqrt 3] (mean 0, variance 1), computed from (seed, field, id) by
// a splitmix64 hash, so no table of the hidden values is stored, whatever the cardinality. The
// three terms have about unit, unit and 0.25 variance. The true probability sigmoid(logit) is kept
// with each sample (CtrDataset::click_prob), so ctr_bound() states the best AUC and log loss a
// model can expect on the data.
//
// Sample i depends only on (seed, i) and the options: any range of samples can be made on demand,
// in any order, on any thread, with the same bytes (train [0, N) and test [N, N + M), say).
//
//   SyntheticCtrOptions o;
//   o.samples = 1000000;
//   CtrDataset train = make_synthetic_ctr(o);
//   SyntheticCtr gen(o);
//   CtrDataset test = gen.make(o.samples, 100000);   // samples [1e6, 1.1e6) of the same stream
//   CtrBound bound = ctr_bound(test);                // bound.auc ~ 0.82 with the defaults
#pragma once

#include <cstdint>
#include <vector>

#include "worker/data/ctr_dataset.h"
#include "worker/data/dataset.h"

namespace pshard::data {

struct SyntheticCtrOptions {
  int64_t samples = 100000;       // make_synthetic_ctr: samples [0, samples)
  uint64_t seed = 1;              // the hidden model and every sample
  int64_t num_fields = 8;         // categorical features per sample (>= 1)
  uint64_t cardinality = 100000;  // ids per field, in [1, 2^53]
  double zipf_exponent = 1.05;    // >= 0; 0 = uniform ids
  int64_t num_dense = 4;          // dense features per sample (>= 0)
  int64_t factor_dim = 4;         // K, the hidden factors' dimension (>= 1)
  double intercept = -1.5;        // the logit's constant: sets the click rate (0.23 by default)
};

// Draws ranks from a Zipf law over [1, n]: P(k) proportional to k^-exponent, by rejection-inversion
// (Hoermann and Derflinger, 1996): O(1) memory and time whatever n; at n = 100000, exponent 1.05, one
// draw in 500 is rejected and redrawn.
//
//   ZipfSampler zipf(100000, 1.05);
//   PortableRng rng(mix_seed(seed, i));
//   uint64_t rank = zipf.sample(rng);   // 1 = the most frequent
class ZipfSampler {
 public:
  ZipfSampler(uint64_t n, double exponent);  // Error unless 1 <= n <= 2^53 and exponent >= 0
  template <typename Rng>
  uint64_t sample(Rng& rng) const {
    for (;;) {
      double u = h_integral_n_ + rng.uniform() * (h_integral_x1_ - h_integral_n_);
      double x = h_integral_inverse(u);
      uint64_t k = round_rank(x);
      if (accept(k, x, u)) return k;
    }
  }

 private:
  double h(double x) const;
  double h_integral(double x) const;
  double h_integral_inverse(double x) const;
  uint64_t round_rank(double x) const;
  bool accept(uint64_t k, double x, double u) const;

  uint64_t n_;
  double exponent_, h_integral_x1_, h_integral_n_, squeeze_;
};

// The generator: checks the options once, then makes any range of samples.
class SyntheticCtr {
 public:
  explicit SyntheticCtr(const SyntheticCtrOptions& options);  // Error for an option out of range

  // Samples [first, first + count) as a data set (click_prob filled).
  CtrDataset make(int64_t first, int64_t count) const;
  // The same samples written to caller-owned rows: dense count * num_dense, ids count * num_fields,
  // labels and click_prob count each (click_prob may be null).
  void fill(int64_t first, int64_t count, float* dense, uint64_t* ids, float* labels, float* click_prob) const;
  // The hidden model's logit for one sample's features (num_fields ids, num_dense floats):
  // click_prob = sigmoid(logit) for every sample made.
  double logit(const uint64_t* ids, const float* dense) const;

  const SyntheticCtrOptions& options() const { return options_; }

 private:
  SyntheticCtrOptions options_;
  ZipfSampler zipf_;
  std::vector<double> dense_weights_;  // 0.5/sqrt(D) * w_j
  uint64_t hidden_key_, sample_key_;
};

// Samples [0, options.samples) of SyntheticCtr(options); name "synthetic-ctr".
CtrDataset make_synthetic_ctr(const SyntheticCtrOptions& options);

// data.name = synthetic-ctr (load_data): samples [0, train) to train on and [train, train + test) to test on, as
// Datasets of two classes (label 1: a click) whose features are the dense ones and whose ids are the categorical
// ones, one table of data.cardinality rows per field. The options are data.fields, data.cardinality,
// data.zipf_exponent, data.dense_features and run.seed; the rest are SyntheticCtrOptions' defaults.
constexpr int64_t kSyntheticCtrTrain = 100000, kSyntheticCtrTest = 20000;
DataSplits make_synthetic_ctr_splits(const Config& cfg, int64_t train, int64_t test);

}  // namespace pshard::data
