// The model table: every registered model builds and runs forward + backward on its example input for each kind of
// data set it claims to fit, rejects the kind it does not, and an unknown name is an Error naming the known models.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "common/config/config.h"
#include "common/error.h"
#include "models/cpu/cpu_backend.h"
#include "models/layers/embedding.h"
#include "models/zoo/registry.h"
#include "tests/models/gradcheck.h"

namespace pshard::models {
namespace {

using testing::random_vector;

// Classes of the data set `m` is run on: a click model (dlrm) has two, the others 10.
int64_t classes_of(const ModelInfo& m) { return std::string(m.name) == "dlrm" ? 2 : 10; }

// A spec for `m` on its example input: classes_of(m) classes, or one regression target (the profile model reads a
// 3-layer profile of 10 classes), and three categorical fields for the models that embed them.
ModelSpec spec_for(const ModelInfo& m, bool classes) {
  ModelSpec s;
  s.name = m.name;
  s.hidden = {32};
  s.profile = std::string(PSHARD_TEST_PROFILES) + "/three_layers.json";
  s.input_shape = m.example_input;
  s.table_rows = {10, 20, 30};
  s.num_classes = classes ? classes_of(m) : 0;
  s.target_dim = classes ? 0 : 1;
  return s;
}

bool fits_classes(const ModelInfo& m) { return m.targets != ModelTargets::kRegression; }
bool fits_regression(const ModelInfo& m) { return m.targets != ModelTargets::kClasses; }

TEST(ModelRegistry, EveryModelBuildsAndRunsOnItsExampleInput) {
  ASSERT_FALSE(registered_models().empty());
  CpuBackend cpu(2);
  for (const ModelInfo& m : registered_models()) {
    for (bool classes : {true, false}) {
      if (classes ? !fits_classes(m) : !fits_regression(m)) continue;
      SCOPED_TRACE(std::string(m.name) + (classes ? " (classes)" : " (regression)"));
      const ModelSpec spec = spec_for(m, classes);
      auto model = Model::create(spec, cpu);
      EXPECT_EQ(model->spec().name, m.name);
      EXPECT_GT(model->num_params_elems(), 0);
      model->init_params(1);
      const int64_t n = 3;
      std::vector<float> x = random_vector(static_cast<size_t>(n * shape_numel(m.example_input)), 2);
      std::vector<int32_t> labels = {0, 4, 9};
      if (classes) {
        for (int32_t& label : labels) label %= static_cast<int32_t>(spec.num_classes);
      }
      // The embedding rows (from the servers when training) are written before the forward.
      if (Embedding* embed = model->embedding()) {
        const std::vector<float> rows = random_vector(static_cast<size_t>(n * embed->fields() * embed->dim()), 3);
        std::copy(rows.begin(), rows.end(), embed->rows(n));
      }
      std::vector<float> targets = {0.5f, -1.0f, 2.0f};
      StepResult r = model->forward(x.data(), n, classes ? labels.data() : nullptr, classes ? nullptr : targets.data(),
                                    /*train=*/true);
      EXPECT_EQ(r.n, n);
      EXPECT_TRUE(std::isfinite(r.loss_sum));
      EXPECT_EQ(model->output().shape(), (std::vector<int64_t>{n, classes ? spec.num_classes : 1}));
      int ready = 0;
      model->backward([&](int, int count) { ready += count; });
      EXPECT_EQ(ready, static_cast<int>(model->params().size()));
    }
  }
}

TEST(ModelRegistry, ModelsRejectDataSetsTheyDoNotFit) {
  CpuBackend cpu(1);
  for (const ModelInfo& m : registered_models()) {
    SCOPED_TRACE(m.name);
    if (!fits_classes(m)) {
      EXPECT_THROW(Model::create(spec_for(m, true), cpu), Error);
    }
    if (!fits_regression(m)) {
      EXPECT_THROW(Model::create(spec_for(m, false), cpu), Error);
    }
  }
}

TEST(ModelRegistry, UnknownNameIsAnErrorNamingTheKnownModels) {
  EXPECT_EQ(find_model("resnet21"), nullptr);
  CpuBackend cpu(1);
  ModelSpec spec = spec_for(registered_models().front(), true);
  spec.name = "resnet21";
  for (int via_create = 0; via_create < 2; ++via_create) {
    std::string what;
    try {
      if (via_create) {
        Model::create(spec, cpu);
      } else {
        model_info(spec.name);
      }
    } catch (const Error& e) {
      what = e.what();
    }
    EXPECT_NE(what.find("unknown model 'resnet21'"), std::string::npos) << what;
    for (const std::string& name : model_names()) EXPECT_NE(what.find(name), std::string::npos) << name << ": " << what;
  }
}

TEST(ModelRegistry, NamesAreUniqueDescribedAndUsableAsConfigChoices) {
  std::set<std::string> seen;
  for (const ModelInfo& m : registered_models()) {
    const std::string name = m.name;
    EXPECT_TRUE(seen.insert(name).second) << "duplicate " << name;
    EXPECT_FALSE(name.empty());
    // model.name's choices are "a|b|c" in the config schema and `pshard config --list`.
    EXPECT_EQ(name.find_first_of("| \t"), std::string::npos) << name;
    EXPECT_GT(std::string(m.description).size(), 10u) << name;
    EXPECT_NE(m.build, nullptr) << name;
    EXPECT_FALSE(m.example_input.empty()) << name;
    EXPECT_EQ(find_model(name), &m);
    EXPECT_EQ(&model_info(name), &m);
  }
  EXPECT_EQ(model_names().size(), registered_models().size());
  // The schema's default model.name is a registered model.
  EXPECT_NE(find_model(Config::defaults().get_string("model.name")), nullptr);
  EXPECT_NE(find_model(ModelSpec().name), nullptr);
}

}  // namespace
}  // namespace pshard::models
