// The check of tests/models/resnet18_test.cc and resnet50_test.cc: pshard's model against torchvision's on the same
// weights (tests/models/torchvision_reference.py writes them and torchvision's results).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "models/cpu/cpu_backend.h"
#include "models/model.h"
#include "tests/support/run_helpers.h"
#include "worker/trainer/model_file.h"
#include "worker/trainer/model_init.h"

namespace pshard::testing {

// ||a - b|| / ||b||, in double.
inline double relative_distance(const float* a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

// Builds `model` for {3, size, size} and `classes`, loads torchvision's weights by name, runs one training forward +
// backward and an eval forward on torchvision's input, and compares logits, loss, every parameter's gradient and
// every running statistic with torchvision's float64 results. Each tensor may be `floor` (1e-4 for outputs and
// statistics, 1e-3 for gradients) or 10 times float32's own error on it away from them, relative L2 distance. That
// error is the larger of torch's float32 result's distance from float64, and how far the same step moves in pshard
// when its input moves by one float32 rounding: a few of ResNet-50's gradients are sums that nearly cancel (batch
// norm over the 8 values per channel of its last block at 64x64 and batch 2), which float32 rounding alone moves by
// percents, and whether torch's float32 sums happen to land near float64 there depends on its kernels. Skips when
// torchvision_reference.py cannot import torch.
inline void check_against_torchvision(const std::string& model, int classes, int size, int batch) {
  const std::string dir = fresh_dir("torchvision-" + model);
  const std::string cmd = "/usr/bin/python3 " + source_dir() + "/tests/models/torchvision_reference.py " + model + " " +
                          std::to_string(classes) + " " + std::to_string(size) + " " + std::to_string(batch) + " " +
                          dir;
  const int rc = run_with_timeout(cmd, 300, dir + "/reference.log");
  if (rc == 77) GTEST_SKIP() << read_file(dir + "/reference.log");
  ASSERT_EQ(rc, 0) << cmd << "\n" << read_file(dir + "/reference.log");
  std::map<std::string, trainer::NamedTensor> ref;
  for (trainer::NamedTensor& t : trainer::load_model_file(dir + "/reference.bin")) ref[t.name] = std::move(t);

  models::CpuBackend cpu(2);
  models::ModelSpec spec;
  spec.name = model;
  spec.input_shape = {3, size, size};
  spec.num_classes = classes;
  auto m = models::Model::create(spec, cpu);
  m->init_params(1);
  const trainer::ModelInitReport init =
      trainer::init_from_tensors(*m, trainer::load_model_file(dir + "/weights.bin"), "weights.bin");
  std::vector<int32_t> labels;
  for (float l : ref.at("labels").data) labels.push_back(static_cast<int32_t>(l));

  // pshard's own sensitivity: the training step of a second model on the same weights, from the input with each value
  // moved by one float32 rounding (relative 2^-24, alternating signs), against the step below.
  std::map<std::string, std::vector<float>> perturbed_grads;
  {
    auto p = models::Model::create(spec, cpu);
    p->init_params(1);
    (void)trainer::init_from_tensors(*p, trainer::load_model_file(dir + "/weights.bin"), "weights.bin");
    std::vector<float> x = ref.at("input").data;
    for (size_t i = 0; i < x.size(); ++i) x[i] *= 1.0f + (i % 2 ? 1.0f : -1.0f) * 5.9604645e-8f;
    p->forward(x.data(), batch, labels.data(), nullptr, true);
    p->backward();
    for (const models::ParamRef& q : p->params()) perturbed_grads[q.name].assign(q.grad, q.grad + q.numel);
  }
  std::map<std::string, double> sensitivity;  // "grad.NAME": filled once the step below has run

  auto tolerance = [&](const std::string& key, double floor) {
    const auto own = sensitivity.find(key);
    return std::max(
        {floor, 10.0 * ref.at("noise." + key).data.at(0), own == sensitivity.end() ? 0.0 : 10.0 * own->second});
  };
  // Every parameter and running statistic came from torchvision, by name.
  EXPECT_EQ(init.loaded.size(), m->params().size() + m->buffers().size()) << init.describe();
  EXPECT_TRUE(init.reinitialised.empty() && init.not_in_file.empty() && init.unused.empty()) << init.describe();

  const models::StepResult r = m->forward(ref.at("input").data.data(), batch, labels.data(), nullptr, true);
  const double logits_d = relative_distance(m->output().data(), ref.at("logits").data);
  EXPECT_LE(logits_d, tolerance("logits", 1e-4)) << "train-mode logits";
  EXPECT_NEAR(r.loss_sum / batch, ref.at("loss").data[0], tolerance("loss", 1e-4) * std::abs(ref.at("loss").data[0]));
  m->backward();
  for (const models::ParamRef& p : m->params()) {
    sensitivity["grad." + p.name] = relative_distance(p.grad, perturbed_grads.at(p.name));
  }
  double worst = 0;
  std::string worst_name;
  for (const models::ParamRef& p : m->params()) {
    const double d = relative_distance(p.grad, ref.at("grad." + p.name).data);
    const double limit = tolerance("grad." + p.name, 1e-3);
    EXPECT_LE(d, limit) << "gradient of " << p.name;
    if (d / limit > worst) {
      worst = d / limit;
      worst_name = p.name;
    }
  }
  std::printf("%s: logits relative distance %.3g; worst gradient at %.3g of its tolerance (%s)\n", model.c_str(),
              logits_d, worst, worst_name.c_str());
  for (const models::BufferRef& b : m->buffers()) {
    EXPECT_LE(relative_distance(b.value, ref.at("running." + b.name).data), tolerance("running." + b.name, 1e-4))
        << b.name;
  }
  m->forward(ref.at("input").data.data(), batch, labels.data(), nullptr, false);
  EXPECT_LE(relative_distance(m->output().data(), ref.at("eval_logits").data), tolerance("eval_logits", 1e-4))
      << "eval-mode logits";
  remove_dir_if_passed(dir);
}

}  // namespace pshard::testing
