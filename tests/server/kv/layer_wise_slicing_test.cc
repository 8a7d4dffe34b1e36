// Layer-wise optimizers (lars, lamb) on a layout that cuts tensors into slices: the warning servers log at init.
#include <gtest/gtest.h>

#include <string>

#include "common/keys/slice_layout.h"
#include "optim/optimizer.h"
#include "server/kv/slice_store.h"

namespace pshard {
namespace {

std::unique_ptr<optim::Optimizer> rule(const std::string& name) {
  optim::OptimizerParams p;
  p.name = name;
  return optim::make_optimizer(p);
}

TEST(LayerWiseSlicing, LarsAndLambNameTheTensorsCutIntoSlicesAndTheSliceSizeThatKeepsThemWhole) {
  // 1 KiB slices: fc1.weight (600 floats, 2400 bytes) in 3 slices, fc2.weight in 2, the bias whole.
  const SliceLayout layout({{"fc1.weight", 600}, {"fc1.bias", 10}, {"fc2.weight", 300}}, 1024, 2);
  for (const char* name : {"lars", "lamb"}) {
    const std::string w = layer_wise_slicing_warning(*rule(name), layout);
    EXPECT_NE(w.find(std::string("optimizer ") + name + " takes its trust ratio per layer"), std::string::npos) << w;
    EXPECT_NE(w.find("cluster.slice_bytes = 1024 cuts fc1.weight (3 slices), fc2.weight (2 slices)"), std::string::npos)
        << w;
    EXPECT_EQ(w.find("fc1.bias"), std::string::npos) << w;
    EXPECT_NE(w.find("cluster.slice_bytes = 2400 keeps every tensor whole"), std::string::npos) << w;
  }
}

TEST(LayerWiseSlicing, NothingToSayForElementWiseRulesOrWholeTensors) {
  const SliceLayout cut({{"w", 600}}, 1024, 1), whole({{"w", 600}}, 4096, 1);
  for (const char* name : {"sgd", "momentum", "adam", "adamw"}) {
    EXPECT_EQ(layer_wise_slicing_warning(*rule(name), cut), "") << name;
  }
  EXPECT_EQ(layer_wise_slicing_warning(*rule("lars"), whole), "");
}

TEST(LayerWiseSlicing, ManyCutTensorsAreCounted) {
  std::vector<TensorSpec> tensors;
  for (int i = 0; i < 5; ++i) tensors.push_back({"t" + std::to_string(i), 512});
  const std::string w = layer_wise_slicing_warning(*rule("lamb"), SliceLayout(tensors, 1024, 1));
  EXPECT_NE(w.find("t0 (2 slices), t1 (2 slices), t2 (2 slices) and 2 more"), std::string::npos) << w;
}

}  // namespace
}  // namespace pshard
