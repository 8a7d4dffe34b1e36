// ResNet-18 (models/zoo/resnet18.cc): its shapes and parameter names, and one training step and an eval forward
// against torchvision's resnet18 on the same weights.
#include <gtest/gtest.h>

#include "common/error.h"
#include "tests/models/torchvision_check.h"

namespace pshard::models {
namespace {

ModelSpec spec_of(std::vector<int64_t> input, int64_t classes) {
  ModelSpec s;
  s.name = "resnet18";
  s.input_shape = std::move(input);
  s.num_classes = classes;
  return s;
}

TEST(Resnet18, HasTorchvisionsParameterCountAndNames) {
  CpuBackend cpu(1);
  auto m = Model::create(spec_of({3, 64, 64}, 1000), cpu);
  EXPECT_EQ(m->num_params_elems(), 11689512);  // sum(p.numel() for p in torchvision.models.resnet18().parameters())
  EXPECT_EQ(m->params().front().name, "conv1.weight");
  EXPECT_EQ(m->params().front().shape, (std::vector<int64_t>{64, 3, 7, 7}));
  EXPECT_EQ(m->params().back().name, "fc.bias");
  bool downsample = false;
  for (const ParamRef& p : m->params()) downsample |= p.name == "layer2.0.downsample.0.weight";
  EXPECT_TRUE(downsample);
  EXPECT_EQ(m->buffers().front().name, "bn1.running_mean");
}

TEST(Resnet18, RefusesInputsItCannotPool) {
  CpuBackend cpu(1);
  EXPECT_THROW(Model::create(spec_of({3, 16, 16}, 10), cpu), Error);
  EXPECT_THROW(Model::create(spec_of({3, 32, 48}, 10), cpu), Error);
  EXPECT_THROW(Model::create(spec_of({784}, 10), cpu), Error);
}

TEST(Resnet18, MatchesTorchvisionOnTheSameWeights) {
  // 64x64 leaves a 2x2 map for the global average pool; batch 2 keeps it fast.
  testing::check_against_torchvision("resnet18", 5, 64, 2);
}

}  // namespace
}  // namespace pshard::models
