// train.init_from: a model initialised from named tensors (worker/trainer/model_init.h), and train.freeze's list.
#include "worker/trainer/model_init.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "models/cpu/cpu_backend.h"
#include "models/model.h"
#include "tests/worker/data/temp_dir.h"
#include "worker/trainer/run_setup.h"

namespace pshard::trainer {
namespace {

std::unique_ptr<models::Model> resnet20(models::Backend& backend, int64_t classes) {
  models::ModelSpec spec;
  spec.name = "resnet20";
  spec.input_shape = {3, 8, 8};
  spec.num_classes = classes;
  auto m = models::Model::create(spec, backend);
  m->init_params(1);
  return m;
}

// Every parameter and buffer of `m`, each filled with a value of its own (index + 0.5).
std::vector<NamedTensor> tensors_of(models::Model& m) {
  std::vector<NamedTensor> all;
  for (const models::ParamRef& p : m.params()) {
    all.push_back({p.name, p.shape, std::vector<float>(static_cast<size_t>(p.numel), all.size() + 0.5f)});
  }
  for (const models::BufferRef& b : m.buffers()) {
    all.push_back({b.name, b.shape, std::vector<float>(static_cast<size_t>(b.numel), all.size() + 0.5f)});
  }
  return all;
}

TEST(ModelInit, CopiesByNameAndKeepsTheFreshClassifierWhenTheClassesDiffer) {
  models::CpuBackend cpu(1);
  auto source = resnet20(cpu, 10);
  const std::vector<NamedTensor> file = tensors_of(*source);
  auto target = resnet20(cpu, 4);
  const std::vector<float> fresh_fc(target->params().back().value,
                                    target->params().back().value + target->params().back().numel);
  const ModelInitReport r = init_from_tensors(*target, file, "source.bin");
  EXPECT_EQ(r.reinitialised,
            (std::vector<std::string>{"fc.weight [4, 64] (file [10, 64])", "fc.bias [4] (file [10])"}));
  EXPECT_EQ(r.loaded.size(), target->params().size() - 2 + target->buffers().size());
  EXPECT_TRUE(r.not_in_file.empty());
  EXPECT_TRUE(r.unused.empty());
  EXPECT_NE(r.describe().find("reinitialised (shape differs): fc.weight [4, 64] (file [10, 64])"), std::string::npos)
      << r.describe();
  // conv1.weight is the first tensor (0.5 everywhere); the first running mean follows the parameters.
  EXPECT_EQ(target->params()[0].value[0], 0.5f);
  EXPECT_EQ(target->params()[0].value[target->params()[0].numel - 1], 0.5f);
  const models::BufferRef mean = target->buffers()[0];
  EXPECT_EQ(mean.name, "bn1.running_mean");
  EXPECT_EQ(mean.value[0], static_cast<float>(target->params().size()) + 0.5f);
  EXPECT_EQ(std::vector<float>(target->params().back().value, target->params().back().value + 4), fresh_fc);
}

TEST(ModelInit, AFileWithoutBuffersKeepsThemAndNamesTheExtraTensors) {
  models::CpuBackend cpu(1);
  auto m = resnet20(cpu, 10);
  std::vector<NamedTensor> file;
  for (const models::ParamRef& p : m->params()) {
    file.push_back({p.name, p.shape, std::vector<float>(static_cast<size_t>(p.numel), 1.0f)});
  }
  file.push_back({"extra.weight", {2}, {1.0f, 2.0f}});
  const ModelInitReport r = init_from_tensors(*m, file, "params-only.bin");
  EXPECT_EQ(r.not_in_file.size(), m->buffers().size());
  EXPECT_EQ(r.unused, (std::vector<std::string>{"extra.weight"}));
  EXPECT_EQ(m->buffers()[1].value[0], 1.0f);  // bn1.running_var: its reset value
}

TEST(ModelInit, AnotherArchitectureIsRefusedNamingTheMissingTensors) {
  models::CpuBackend cpu(1);
  models::ModelSpec spec;
  spec.name = "mlp";
  spec.hidden = {8};
  spec.input_shape = {3, 8, 8};
  spec.num_classes = 10;
  auto mlp = models::Model::create(spec, cpu);
  auto m = resnet20(cpu, 10);
  try {
    init_from_tensors(*m, tensors_of(*mlp), "mlp.bin");
    FAIL() << "an mlp's tensors initialised a resnet20";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("mlp.bin does not fit model resnet20: it has no tensor conv1.weight"), std::string::npos)
        << what;
  }
  // Only a classifier in common, and of another shape: nothing would be loaded.
  std::vector<NamedTensor> fc_only = {{"fc.weight", {3, 64}, std::vector<float>(192, 1.0f)}};
  for (const models::ParamRef& p : m->params()) {
    if (p.name != "fc.weight") fc_only.push_back({p.name, {p.numel + 1}, std::vector<float>(p.numel + 1, 1.0f)});
  }
  EXPECT_THROW(init_from_tensors(*m, fc_only, "odd.bin"), Error);
}

TEST(ModelInit, ASavedModelFileCarriesTheRunningStatisticsBack) {
  models::CpuBackend cpu(1);
  auto trained = resnet20(cpu, 10);
  // One training forward moves the running statistics away from their reset values (mean 0, variance 1).
  std::vector<float> x(2 * 3 * 8 * 8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  const int32_t labels[2] = {1, 2};
  trained->forward(x.data(), 2, labels, nullptr, true);
  data::testing::TempDir dir;
  save_model_file(*trained, dir.file("model.bin"));
  const std::vector<NamedTensor> file = load_model_file(dir.file("model.bin"));
  ASSERT_EQ(file.size(), trained->params().size() + trained->buffers().size());
  EXPECT_EQ(file[trained->params().size()].name, "bn1.running_mean");

  auto fresh = resnet20(cpu, 10);
  const ModelInitReport r = init_from_tensors(*fresh, file, "model.bin");
  EXPECT_TRUE(r.not_in_file.empty() && r.reinitialised.empty() && r.unused.empty()) << r.describe();
  for (size_t i = 0; i < fresh->buffers().size(); ++i) {
    const models::BufferRef a = trained->buffers()[i], b = fresh->buffers()[i];
    EXPECT_TRUE(std::equal(a.value, a.value + a.numel, b.value)) << a.name;
  }
  EXPECT_NE(fresh->buffers()[0].value[0], 0.0f);
}

TEST(FreezePrefixes, SplitsOnCommasAndDropsBlanks) {
  EXPECT_EQ(freeze_prefixes(""), std::vector<std::string>{});
  EXPECT_EQ(freeze_prefixes("conv1, bn1 ,layer1,,"), (std::vector<std::string>{"conv1", "bn1", "layer1"}));
}

}  // namespace
}  // namespace pshard::trainer
