// DLRM: the dot interaction and embedding layers (values and gradients), and the dlrm model end to end: dense and
// row gradients against central differences, also with the bottom MLP frozen.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/error.h"
#include "models/cpu/cpu_backend.h"
#include "models/layers/dot_interaction.h"
#include "models/layers/embedding.h"
#include "models/model.h"
#include "tests/models/gradcheck.h"
#include "tests/support/error_of.h"

namespace pshard::models {
namespace {

using testing::check_layer_gradients;
using testing::random_vector;

using pshard::testing::error_of;

TEST(DotInteraction, ForwardIsTheFirstVectorThenEveryPairsDotProduct) {
  CpuBackend cpu(1);
  DotInteraction interact(cpu, 3, 2);
  EXPECT_STREQ(interact.type(), "DotInteraction");
  EXPECT_EQ(interact.input_shape(), (std::vector<int64_t>{6}));
  EXPECT_EQ(interact.output_shape(), (std::vector<int64_t>{2 + 3}));
  // Two samples of z0, z1, z2.
  std::vector<float> x = {1, 2, 3, -1, 0.5f, 4,  //
                          0, 1, 2, 2,  -3,   1};
  std::vector<float> y(10, -99.0f);
  interact.forward(Tensor::view(x.data(), {2, 6}), Tensor::view(y.data(), {2, 5}), true);
  // z0, then z0.z1, z0.z2, z1.z2.
  EXPECT_EQ(y, (std::vector<float>{1, 2, 1, 8.5f, -2.5f,  //
                                   0, 1, 2, 1, -4}));
}

TEST(DotInteraction, BackwardMatchesCentralDifferences) {
  CpuBackend cpu(1);
  DotInteraction interact(cpu, 4, 3);
  check_layer_gradients(interact, cpu, 3, random_vector(3 * 12, 21), {}, 22);
}

TEST(DotInteraction, RefusesFewerThanTwoVectors) {
  CpuBackend cpu(1);
  EXPECT_NE(error_of([&] { DotInteraction(cpu, 1, 4); }).find("at least 2 vectors"), std::string::npos);
}

TEST(Embedding, ForwardAppendsEachSamplesRowsAfterItsFeatures) {
  CpuBackend cpu(1);
  Embedding embed(cpu, 2, {{"embed.0", 10, 3, 0.1f}, {"embed.1", 5, 3, 0.1f}});
  EXPECT_STREQ(embed.type(), "Embedding");
  EXPECT_TRUE(embed.trains_outside());
  EXPECT_TRUE(embed.param_decls().empty());
  EXPECT_EQ(embed.fields(), 2);
  EXPECT_EQ(embed.dim(), 3);
  EXPECT_EQ(embed.tables()[1].name, "embed.1");
  EXPECT_EQ(embed.tables()[1].rows, 5u);
  EXPECT_EQ(embed.output_shape(), (std::vector<int64_t>{2 + 2 * 3}));
  const int64_t n = 2;
  std::vector<float> x = {1, 2, 3, 4};
  // Sample 0: field 0 row 10 11 12, field 1 row 13 14 15; sample 1: 20 .. 25.
  const std::vector<float> rows = {10, 11, 12, 13, 14, 15, 20, 21, 22, 23, 24, 25};
  std::copy(rows.begin(), rows.end(), embed.rows(n));
  std::vector<float> y(n * 8);
  embed.forward(Tensor::view(x.data(), {n, 2}), Tensor::view(y.data(), {n, 8}), true);
  EXPECT_EQ(y, (std::vector<float>{1, 2, 10, 11, 12, 13, 14, 15,  //
                                   3, 4, 20, 21, 22, 23, 24, 25}));
}

TEST(Embedding, BackwardSplitsDyIntoDxAndTheRowsGradients) {
  CpuBackend cpu(1);
  Embedding embed(cpu, 2, {{"a", 10, 2, 0.1f}, {"b", 10, 2, 0.1f}});
  const int64_t n = 2;
  std::vector<float> x = random_vector(n * 2, 1), y(n * 6);
  std::fill_n(embed.rows(n), n * 4, 0.5f);
  embed.forward(Tensor::view(x.data(), {n, 2}), Tensor::view(y.data(), {n, 6}), true);
  std::vector<float> dy = {1, 2, 3, 4,  5,  6,  //
                           7, 8, 9, 10, 11, 12};
  std::vector<float> dx(n * 2, -1.0f);
  Tensor dxt = Tensor::view(dx.data(), {n, 2});
  embed.backward(Tensor::view(x.data(), {n, 2}), Tensor::view(y.data(), {n, 6}), Tensor::view(dy.data(), {n, 6}), &dxt);
  EXPECT_EQ(dx, (std::vector<float>{1, 2, 7, 8}));
  EXPECT_EQ(std::vector<float>(embed.row_grads(), embed.row_grads() + n * 4),
            (std::vector<float>{3, 4, 5, 6, 9, 10, 11, 12}));
  // Without dx (the lowest layer that trains): the rows' gradients all the same.
  std::reverse(dy.begin(), dy.end());
  embed.backward(Tensor::view(x.data(), {n, 2}), Tensor::view(y.data(), {n, 6}), Tensor::view(dy.data(), {n, 6}),
                 nullptr);
  EXPECT_EQ(std::vector<float>(embed.row_grads(), embed.row_grads() + n * 4),
            (std::vector<float>{10, 9, 8, 7, 4, 3, 2, 1}));
}

TEST(Embedding, RefusesBadTablesNamingThem) {
  CpuBackend cpu(1);
  const std::string mismatch = error_of([&] {
    Embedding(cpu, 4, {{"embed.0", 10, 4, 0.1f}, {"embed.1", 10, 8, 0.1f}});
  });
  EXPECT_NE(mismatch.find("table embed.1 has dim 8 but table embed.0 has 4"), std::string::npos) << mismatch;
  const std::string empty = error_of([&] { Embedding(cpu, 4, {{"embed.0", 0, 4, 0.1f}}); });
  EXPECT_NE(empty.find("table embed.0 has no rows"), std::string::npos) << empty;
  const std::string zero_dim = error_of([&] { Embedding(cpu, 4, {{"embed.0", 10, 0, 0.1f}}); });
  EXPECT_NE(zero_dim.find("table embed.0 has dim 0"), std::string::npos) << zero_dim;
  EXPECT_NE(error_of([&] { Embedding(cpu, 4, {}); }).find("at least one table"), std::string::npos);
}

TEST(Embedding, ForwardWithoutRowsForTheBatchIsAnError) {
  CpuBackend cpu(1);
  Embedding embed(cpu, 1, {{"embed.0", 10, 2, 0.1f}});
  std::vector<float> x(3), y(9);
  embed.rows(2);
  const std::string what = error_of([&] {
    embed.forward(Tensor::view(x.data(), {3, 1}), Tensor::view(y.data(), {3, 3}), true);
  });
  EXPECT_NE(what.find("forward over 3 samples, but rows() holds 2"), std::string::npos) << what;
}

// The dlrm model of these tests: 3 dense features, 3 fields of 4-value rows, 2 classes.
ModelSpec dlrm_spec() {
  ModelSpec s;
  s.name = "dlrm";
  s.input_shape = {3};
  s.num_classes = 2;
  s.target_dim = 0;
  s.table_rows = {50, 40, 30};
  s.embedding_dim = 4;
  s.bottom_hidden = {8};
  s.hidden = {8};
  return s;
}

// One batch: dense features, the rows the servers would send, labels.
struct Batch {
  int64_t n = 5;
  std::vector<float> x, rows;
  std::vector<int32_t> labels = {0, 1, 1, 0, 1};
  Batch(const Embedding& embed, uint32_t seed)
      : x(random_vector(static_cast<size_t>(n * 3), seed, -2.0f, 2.0f)),
        rows(random_vector(static_cast<size_t>(n * embed.fields() * embed.dim()), seed + 1)) {}
};

double mean_loss(Model& m, const Batch& b) {
  std::copy(b.rows.begin(), b.rows.end(), m.embedding()->rows(b.n));
  return m.forward(b.x.data(), b.n, b.labels.data(), nullptr, true).loss_sum / static_cast<double>(b.n);
}

double tolerance(double analytic, double numeric) {
  return 1e-3 + 2e-2 * std::max(std::fabs(analytic), std::fabs(numeric));
}

// Expects `analytic` to be the central difference of `loss` when `value` moves by +-step. Returns false, checking
// nothing, where the one-sided differences disagree: the step crossed a ReLU kink.
bool check_difference(const std::function<double()>& loss, float& value, double analytic, const std::string& what) {
  const float step = 2e-3f, keep = value;
  const double center = loss();
  value = keep + step;
  const double up = loss();
  value = keep - step;
  const double down = loss();
  value = keep;
  const double numeric = (up - down) / (2.0 * step), tol = tolerance(analytic, numeric);
  if (std::fabs((up - center) / step - (center - down) / step) > 2 * tol) return false;
  EXPECT_NEAR(analytic, numeric, tol) << what;
  return true;
}

// Every row gradient of the batch (written to the rows buffer through `b.rows`) against central differences.
void check_row_gradients(Model& m, Batch& b, const std::vector<float>& analytic) {
  int checked = 0;
  for (size_t i = 0; i < b.rows.size(); ++i) {
    const std::string what = "row value " + std::to_string(i);
    checked += check_difference([&] { return mean_loss(m, b); }, b.rows[i], analytic[i], what) ? 1 : 0;
  }
  EXPECT_GE(checked * 10, static_cast<int>(b.rows.size()) * 9) << "too many row values sit on a kink";
}

TEST(DlrmModel, LayersParametersAndTables) {
  CpuBackend cpu(1);
  auto m = Model::create(dlrm_spec(), cpu);
  std::vector<std::string> layers;
  for (int l = 0; l < m->num_layers(); ++l) layers.push_back(m->layer_name(l));
  EXPECT_EQ(layers, (std::vector<std::string>{"bottom_fc1", "bottom_relu1", "bottom_fc2", "bottom_relu2", "embed",
                                              "interact", "top_fc1", "top_relu1", "top_fc2"}));
  std::vector<std::string> params;
  for (const ParamRef& p : m->params()) params.push_back(p.name);
  EXPECT_EQ(params,
            (std::vector<std::string>{"bottom_fc1.weight", "bottom_fc1.bias", "bottom_fc2.weight", "bottom_fc2.bias",
                                      "top_fc1.weight", "top_fc1.bias", "top_fc2.weight", "top_fc2.bias"}));
  EXPECT_EQ(m->params()[2].shape, (std::vector<int64_t>{4, 8}));      // the bottom MLP ends in embedding_dim
  EXPECT_EQ(m->params()[4].shape, (std::vector<int64_t>{8, 4 + 6}));  // z0 and the 4 * 3 / 2 pairs
  ASSERT_NE(m->embedding(), nullptr);
  EXPECT_EQ(m->embedding_layer(), 4);
  EXPECT_EQ(&m->layer(4), m->embedding());
  const std::vector<TableDecl>& tables = m->embedding()->tables();
  ASSERT_EQ(tables.size(), 3u);
  for (size_t f = 0; f < 3; ++f) {
    EXPECT_EQ(tables[f].name, "embed." + std::to_string(f));
    EXPECT_EQ(tables[f].rows, dlrm_spec().table_rows[f]);
    EXPECT_EQ(tables[f].dim, 4);
    EXPECT_FLOAT_EQ(tables[f].init_scale, 0.05f);
  }
  auto mlp = Model::create(
      [] {
        ModelSpec s;
        s.input_shape = {3};
        s.num_classes = 2;
        s.hidden = {4};
        return s;
      }(),
      cpu);
  EXPECT_EQ(mlp->embedding(), nullptr);
  EXPECT_EQ(mlp->embedding_layer(), -1);
}

TEST(DlrmModel, SpecsItCannotBuildAreErrorsNamingTheKey) {
  CpuBackend cpu(1);
  auto error_for = [&](const std::function<void(ModelSpec&)>& change) {
    ModelSpec s = dlrm_spec();
    change(s);
    return error_of([&] { Model::create(s, cpu); });
  };
  EXPECT_NE(error_for([](ModelSpec& s) { s.table_rows.clear(); }).find("data.name = synthetic-ctr"), std::string::npos);
  EXPECT_NE(error_for([](ModelSpec& s) { s.embedding_dim = 0; }).find("model.embedding_dim"), std::string::npos);
  EXPECT_NE(error_for([](ModelSpec& s) { s.num_classes = 10; }).find("2 classes"), std::string::npos);
  EXPECT_NE(error_for([](ModelSpec& s) { s.input_shape = {1, 3, 1}; }).find("dense features"), std::string::npos);
  EXPECT_NE(error_for([](ModelSpec& s) { s.bottom_hidden = {0}; }).find("model.bottom_hidden"), std::string::npos);
}

TEST(DlrmModel, SpecFromConfigReadsTheDlrmKeys) {
  const Config defaults = Config::defaults();
  const ModelSpec d = ModelSpec::from_config(defaults, {3}, 2, 0);
  EXPECT_EQ(d.embedding_dim, 16);
  EXPECT_EQ(d.bottom_hidden, (std::vector<int64_t>{32}));
  EXPECT_FLOAT_EQ(d.embedding_init_scale, 0.05f);
  const Config cfg = Config::from_string(
      "[model]\nname = \"dlrm\"\nembedding_dim = 8\nbottom_hidden = [16, 12]\nembedding_init_scale = 0.25\n", "t.toml");
  const ModelSpec s = ModelSpec::from_config(cfg, {3}, 2, 0);
  EXPECT_EQ(s.embedding_dim, 8);
  EXPECT_EQ(s.bottom_hidden, (std::vector<int64_t>{16, 12}));
  EXPECT_FLOAT_EQ(s.embedding_init_scale, 0.25f);
  EXPECT_TRUE(s.table_rows.empty());  // the data set's, set by the trainer
}

TEST(DlrmModel, DenseAndRowGradientsMatchCentralDifferences) {
  CpuBackend cpu(1);
  auto m = Model::create(dlrm_spec(), cpu);
  m->init_params(3);
  Batch b(*m->embedding(), 4);
  const double loss = mean_loss(*m, b);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_EQ(m->output().shape(), (std::vector<int64_t>{b.n, 2}));
  int ready = 0;
  m->backward([&](int, int count) { ready += count; });
  EXPECT_EQ(ready, static_cast<int>(m->params().size()));
  const int64_t row_values = b.n * 3 * 4;
  const std::vector<float> row_grads(m->embedding()->row_grads(), m->embedding()->row_grads() + row_values);
  EXPECT_GT(std::count_if(row_grads.begin(), row_grads.end(), [](float g) { return g != 0.0f; }), row_values / 2);
  std::vector<std::vector<float>> dense;
  for (const ParamRef& p : m->params()) dense.emplace_back(p.grad, p.grad + p.numel);

  // (a) A few elements of every dense tensor.
  int checked = 0;
  for (size_t t = 0; t < m->params().size(); ++t) {
    const ParamRef& p = m->params()[t];
    for (int64_t k = 0; k < std::min<int64_t>(p.numel, 6); ++k) {
      const int64_t i = (k * 7919) % p.numel;
      const std::string what = p.name + "[" + std::to_string(i) + "]";
      checked += check_difference([&] { return mean_loss(*m, b); }, p.value[i], dense[t][i], what) ? 1 : 0;
    }
  }
  EXPECT_GE(checked, 40);
  // (b) Every row value of the batch.
  check_row_gradients(*m, b, row_grads);
}

TEST(DlrmModel, BackwardReachesTheEmbeddingWithTheBottomMlpFrozen) {
  CpuBackend cpu(1);
  auto m = Model::create(dlrm_spec(), cpu);
  m->init_params(5);
  EXPECT_EQ(m->freeze({"bottom_fc1", "bottom_fc2"}), 4);
  // The bottom MLP's gradients are left alone (marker), the rows' gradients are the batch's.
  const ParamRef& bottom = m->params()[0];
  std::fill_n(bottom.grad, bottom.numel, 7.0f);
  Batch b(*m->embedding(), 6);
  mean_loss(*m, b);
  std::vector<int> firsts;
  m->backward([&](int first, int) { firsts.push_back(first); });
  EXPECT_EQ(firsts, (std::vector<int>{6, 4}));  // top_fc2, top_fc1
  EXPECT_TRUE(std::all_of(bottom.grad, bottom.grad + bottom.numel, [](float g) { return g == 7.0f; }));
  ASSERT_NE(m->embedding()->row_grads(), nullptr) << "backward stopped above the embedding";
  const std::vector<float> row_grads(m->embedding()->row_grads(), m->embedding()->row_grads() + b.rows.size());
  check_row_gradients(*m, b, row_grads);
}

TEST(DlrmModel, EveryDenseParameterFrozenStillTrainsTheRows) {
  CpuBackend cpu(1);
  auto m = Model::create(dlrm_spec(), cpu);
  m->init_params(7);
  EXPECT_EQ(m->freeze({"bottom_fc1", "bottom_fc2", "top_fc1", "top_fc2"}), 8);
  Batch b(*m->embedding(), 8);
  mean_loss(*m, b);
  m->backward();
  ASSERT_NE(m->embedding()->row_grads(), nullptr);
  const std::vector<float> row_grads(m->embedding()->row_grads(), m->embedding()->row_grads() + b.rows.size());
  check_row_gradients(*m, b, row_grads);
}

TEST(DlrmModel, RowGradientsCarryTheLossScale) {
  CpuBackend cpu(1);
  auto m = Model::create(dlrm_spec(), cpu);
  m->init_params(9);
  Batch b(*m->embedding(), 10);
  mean_loss(*m, b);
  m->backward();
  const std::vector<float> plain(m->embedding()->row_grads(), m->embedding()->row_grads() + b.rows.size());
  m->set_loss_scale(4.0f);
  mean_loss(*m, b);
  m->backward();
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_FLOAT_EQ(m->embedding()->row_grads()[i], 4.0f * plain[i]) << i;
}

}  // namespace
}  // namespace pshard::models
