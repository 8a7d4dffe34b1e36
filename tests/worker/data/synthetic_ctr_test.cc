// synthetic-ctr: reproducible samples and ranges, Zipf id frequencies, labels from the hidden model, the bound.
#include "worker/data/synthetic_ctr.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/error.h"
#include "common/metrics/ctr_metrics.h"
#include "tests/worker/data/temp_dir.h"
#include "worker/data/batch_loader.h"
#include "worker/data/random.h"

namespace pshard::data {
namespace {

using testing::error_of;

SyntheticCtrOptions small(int64_t samples, uint64_t seed) {
  SyntheticCtrOptions o;
  o.samples = samples;
  o.seed = seed;
  return o;
}

bool same_bytes(const CtrDataset& a, const CtrDataset& b) {
  return a.dense == b.dense && a.ids == b.ids && a.labels == b.labels && a.click_prob == b.click_prob &&
         a.cardinality == b.cardinality && a.num_dense == b.num_dense && a.num_fields == b.num_fields;
}

// Zipf's normaliser: sum_{k=1}^{n} k^-s.
double zipf_norm(uint64_t n, double s) {
  double h = 0;
  for (uint64_t k = n; k >= 1; --k) h += std::pow(static_cast<double>(k), -s);  // small terms first
  return h;
}

TEST(SyntheticCtr, SameSeedSameBytesOtherSeedDiffers) {
  CtrDataset a = make_synthetic_ctr(small(5000, 7));
  CtrDataset b = make_synthetic_ctr(small(5000, 7));
  CtrDataset c = make_synthetic_ctr(small(5000, 8));
  EXPECT_TRUE(same_bytes(a, b));
  ASSERT_EQ(a.size(), 5000);
  EXPECT_EQ(a.name, "synthetic-ctr");
  EXPECT_EQ(a.num_fields, 8);
  EXPECT_EQ(a.num_dense, 4);
  EXPECT_EQ(a.cardinality, std::vector<uint64_t>(8, 100000));
  EXPECT_NE(a.ids, c.ids);
  EXPECT_NE(a.dense, c.dense);
  EXPECT_NE(a.labels, c.labels);
  a.check_consistent("seed 7");
}

TEST(SyntheticCtr, AnyRangeEqualsTheWholeStream) {
  SyntheticCtr gen(small(0, 3));
  CtrDataset whole = gen.make(0, 3000);
  CtrDataset tail = gen.make(2000, 1000), middle = gen.make(1234, 1);
  ASSERT_EQ(tail.size(), 1000);
  EXPECT_EQ(std::memcmp(tail.ids.data(), whole.id_row(2000), 1000 * 8 * sizeof(uint64_t)), 0);
  EXPECT_EQ(std::memcmp(tail.dense.data(), whole.dense_row(2000), 1000 * 4 * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(tail.labels.data(), whole.labels.data() + 2000, 1000 * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(tail.click_prob.data(), whole.click_prob.data() + 2000, 1000 * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(middle.ids.data(), whole.id_row(1234), 8 * sizeof(uint64_t)), 0);
  EXPECT_EQ(middle.labels[0], whole.labels[1234]);
  // make_synthetic_ctr is the range [0, samples).
  EXPECT_TRUE(same_bytes(make_synthetic_ctr(small(3000, 3)), whole));
}

TEST(SyntheticCtr, IdsStayWithinTheCardinality) {
  SyntheticCtrOptions o = small(20000, 5);
  o.cardinality = 10;
  o.zipf_exponent = 0;  // uniform
  o.num_fields = 3;
  CtrDataset d = make_synthetic_ctr(o);
  d.check_consistent("cardinality 10");
  std::vector<int64_t> counts(10, 0);
  for (uint64_t id : d.ids) {
    ASSERT_LT(id, 10u);
    ++counts[id];
  }
  // 60000 uniform draws over 10 ids: 6000 each, sd 73.
  for (int64_t c : counts) EXPECT_NEAR(static_cast<double>(c), 6000.0, 400.0);

  o.cardinality = 1;
  for (uint64_t id : make_synthetic_ctr(o).ids) ASSERT_EQ(id, 0u);
}

TEST(SyntheticCtr, IdFrequenciesFollowZipf) {
  // 200k samples of the defaults: in every field, id k-1 has share k^-1.05 / H(100000, 1.05).
  CtrDataset d = make_synthetic_ctr(small(200000, 11));
  const double h = zipf_norm(100000, 1.05);
  for (int64_t f = 0; f < d.num_fields; ++f) {
    std::vector<int64_t> counts(4, 0);
    uint64_t max_id = 0;
    for (int64_t i = 0; i < d.size(); ++i) {
      uint64_t id = d.id_row(i)[f];
      if (id < 4) ++counts[id];
      max_id = std::max(max_id, id);
    }
    for (uint64_t k = 1; k <= 4; ++k) {
      double expected = std::pow(static_cast<double>(k), -1.05) / h;
      double share = static_cast<double>(counts[k - 1]) / 200000.0;
      double sd = std::sqrt(expected * (1 - expected) / 200000.0);
      EXPECT_NEAR(share, expected, 5 * sd) << "field " << f << " id " << k - 1;
    }
    EXPECT_LT(max_id, 100000u);
    EXPECT_GT(max_id, 50000u) << "the tail is drawn too";
  }
  EXPECT_NEAR(1.0 / h, 0.1075, 0.0005);  // the most frequent id's share, for the record
}

TEST(ZipfSampler, SharesForOtherExponents) {
  // Exponent 1 (H = log x, the series' special case) and 2 over 1000 ids, 400k draws each.
  for (double s : {1.0, 2.0, 0.5}) {
    ZipfSampler zipf(1000, s);
    PortableRng rng(mix_seed(99, static_cast<uint64_t>(s * 10)));
    std::vector<int64_t> counts(1001, 0);
    for (int i = 0; i < 400000; ++i) {
      uint64_t k = zipf.sample(rng);
      ASSERT_GE(k, 1u);
      ASSERT_LE(k, 1000u);
      ++counts[k];
    }
    double h = zipf_norm(1000, s);
    for (uint64_t k : {1u, 2u, 10u, 1000u}) {
      double expected = std::pow(static_cast<double>(k), -s) / h;
      double sd = std::sqrt(expected * (1 - expected) / 400000.0);
      EXPECT_NEAR(static_cast<double>(counts[k]) / 400000.0, expected, 5 * sd + 1e-6) << "s " << s << " k " << k;
    }
  }
}

TEST(SyntheticCtr, LabelsFollowTheHiddenModelAndTheBoundIsHigh) {
  SyntheticCtrOptions o = small(200000, 21);
  SyntheticCtr gen(o);
  CtrDataset d = gen.make(0, o.samples);
  // click_prob is sigmoid(logit) of the sample's own features.
  for (int64_t i = 0; i < 1000; ++i) {
    double p = 1.0 / (1.0 + std::exp(-gen.logit(d.id_row(i), d.dense_row(i))));
    ASSERT_EQ(d.click_prob[static_cast<size_t>(i)], static_cast<float>(p)) << "sample " << i;
  }
  CtrBound b = ctr_bound(d);
  // The label rate is the mean probability up to Bernoulli noise (sd <= 0.5 / sqrt(200000) = 0.0011).
  EXPECT_NEAR(b.label_rate, b.mean_click_prob, 0.006);
  EXPECT_GT(b.label_rate, 0.15);
  EXPECT_LT(b.label_rate, 0.35);
  EXPECT_GT(b.auc, 0.78);  // 0.820 for this seed
  EXPECT_LT(b.auc, 0.87);
  EXPECT_LT(b.log_loss, b.constant_log_loss - 0.05);
  // The bound is the metrics' own AUC and log loss of the true probabilities.
  EXPECT_EQ(b.auc, auc(d.click_prob.data(), d.labels.data(), d.labels.size()));
  EXPECT_EQ(b.log_loss, log_loss(d.click_prob.data(), d.labels.data(), d.labels.size()));

  // A score that ignores the features: AUC 0.5 up to sampling noise (sd ~ 0.0015 here).
  PortableRng rng(12345);
  std::vector<float> noise(d.labels.size());
  for (float& x : noise) x = static_cast<float>(rng.uniform());
  EXPECT_NEAR(auc(noise.data(), d.labels.data(), noise.size()), 0.5, 0.008);
  // Both kinds of feature carry signal: the id terms alone (dense features zeroed) give 0.797 here,
  // the dense term alone (every id fixed at 0) 0.614.
  std::vector<float> ids_only(d.labels.size()), dense_only(d.labels.size()), zeros(4, 0.0f);
  std::vector<uint64_t> id0(8, 0);
  for (size_t i = 0; i < d.labels.size(); ++i) {
    ids_only[i] = static_cast<float>(gen.logit(d.id_row(static_cast<int64_t>(i)), zeros.data()));
    dense_only[i] = static_cast<float>(gen.logit(id0.data(), d.dense_row(static_cast<int64_t>(i))));
  }
  EXPECT_GT(auc(ids_only.data(), d.labels.data(), ids_only.size()), 0.77);
  EXPECT_GT(auc(dense_only.data(), d.labels.data(), dense_only.size()), 0.59);
}

TEST(SyntheticCtr, RefusesBadOptionsAndDataWithoutTruth) {
  auto refuse = [](void (*edit)(SyntheticCtrOptions&)) {
    SyntheticCtrOptions o;
    edit(o);
    return error_of([&o] { SyntheticCtr gen(o); });
  };
  EXPECT_EQ(refuse([](SyntheticCtrOptions& o) { o.num_fields = 0; }), "synthetic-ctr: num_fields must be >= 1, got 0");
  EXPECT_EQ(refuse([](SyntheticCtrOptions& o) { o.factor_dim = 0; }), "synthetic-ctr: factor_dim must be >= 1, got 0");
  EXPECT_EQ(refuse([](SyntheticCtrOptions& o) { o.num_dense = -1; }), "synthetic-ctr: num_dense must be >= 0, got -1");
  EXPECT_EQ(refuse([](SyntheticCtrOptions& o) { o.cardinality = 0; }),
            "zipf: the number of ids must be in [1, 2^53], got 0");
  EXPECT_EQ(refuse([](SyntheticCtrOptions& o) { o.zipf_exponent = -1; }),
            "zipf: the exponent must be a finite number >= 0, got -1.000000");
  CtrDataset no_truth = make_synthetic_ctr(small(10, 1));
  no_truth.name = "criteo";
  no_truth.click_prob.clear();
  EXPECT_EQ(error_of([&] { ctr_bound(no_truth); }),
            "ctr_bound: criteo has no true click probabilities (only synthetic data has them)");
}

TEST(SyntheticCtr, NoDenseFeaturesAndOneField) {
  SyntheticCtrOptions o = small(1000, 2);
  o.num_dense = 0;
  o.num_fields = 1;  // no pairs: bias terms only
  CtrDataset d = make_synthetic_ctr(o);
  d.check_consistent("one field");
  EXPECT_TRUE(d.dense.empty());
  EXPECT_EQ(d.ids.size(), 1000u);
  // With one field the probability depends on the id alone.
  int64_t same_id = 0;
  for (int64_t i = 1; i < d.size(); ++i) {
    if (d.ids[static_cast<size_t>(i)] != d.ids[0]) continue;
    ++same_id;
    EXPECT_EQ(d.click_prob[static_cast<size_t>(i)], d.click_prob[0]);
  }
  EXPECT_GT(same_id, 0);
}

// data.name = synthetic-ctr: the generator's samples as two classes, the dense features as the sample, one table of
// data.cardinality rows per field; the test split continues the training stream; batches carry each sample's ids.
TEST(SyntheticCtr, LoadDataMakesTwoClassSplitsWithIdsAndBatchesCarryThem) {
  const Config cfg = Config::from_string(R"(
[run]
seed = 5
[data]
name = "synthetic-ctr"
train_size = 300
test_size = 50
fields = 3
cardinality = 40
dense_features = 2
)",
                                         "ctr.toml");
  const DataSplits s = load_data(cfg);
  try {  // 0 means "any id" to Criteo's loader; a generator needs a range
    load_data(Config::from_string("[data]\nname = \"synthetic-ctr\"\ncardinality = 0\n", "zero.toml"));
    ADD_FAILURE() << "data.cardinality = 0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("zero.toml: data.cardinality = 0: synthetic-ctr draws"), std::string::npos)
        << e.what();
  }
  SyntheticCtrOptions o;
  o.seed = 5;
  o.num_fields = 3;
  o.cardinality = 40;
  o.num_dense = 2;
  const SyntheticCtr gen(o);
  const CtrDataset train = gen.make(0, 300), test = gen.make(300, 50);
  EXPECT_EQ(s.train.name, "synthetic-ctr");
  EXPECT_EQ(s.train.sample_shape, std::vector<int64_t>{2});
  EXPECT_EQ(s.train.num_classes, 2);
  EXPECT_EQ(s.train.size(), 300);
  EXPECT_EQ(s.test.size(), 50);
  EXPECT_EQ(s.train.id_fields, 3);
  EXPECT_EQ(s.train.table_rows, (std::vector<uint64_t>{40, 40, 40}));
  EXPECT_EQ(s.train.features, train.dense);
  EXPECT_EQ(s.train.ids, train.ids);
  EXPECT_EQ(s.test.ids, test.ids);
  EXPECT_EQ(s.test.click_prob, test.click_prob);
  EXPECT_TRUE(s.train.click_prob.empty());  // only the evaluation reads them
  for (int64_t i = 0; i < 300; ++i) {
    ASSERT_EQ(s.train.labels[static_cast<size_t>(i)], train.labels[static_cast<size_t>(i)] > 0.5f ? 1 : 0);
  }
  // A batch holds the ids of the samples it holds, field after field.
  BatchLoader loader(s.test, std::vector<int64_t>{7, 3, 41}, 3, 0);
  loader.start_epoch(0);
  Batch b;
  ASSERT_TRUE(loader.next(&b));
  ASSERT_EQ(b.ids.size(), 9u);
  for (int k = 0; k < 3; ++k) {
    const int64_t sample = std::vector<int64_t>{7, 3, 41}[static_cast<size_t>(k)];
    for (int f = 0; f < 3; ++f) EXPECT_EQ(b.ids[static_cast<size_t>(3 * k + f)], test.id_row(sample)[f]);
    EXPECT_EQ(b.x[static_cast<size_t>(2 * k)], test.dense_row(sample)[0]);
  }
  // An id outside its table is named.
  Dataset bad = s.test;
  bad.ids[4] = 40;
  EXPECT_EQ(error_of([&] { bad.check_consistent("test"); }),
            "test: sample 1 field 1 has id 40, outside its table of 40 rows");
}

}  // namespace
}  // namespace pshard::data
