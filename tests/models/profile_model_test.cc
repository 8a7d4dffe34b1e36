// Profile models: a profile file's layers become the model's layers and tensors, forward and backward sleep the
// layers' times scaled to the batch, gradients are fixed finite values, and every kind of bad file is refused with
// the file and the fault named.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "models/cpu/cpu_backend.h"
#include "models/model.h"
#include "models/zoo/profile.h"

namespace pshard::models {
namespace {

const std::string kProfiles = PSHARD_TEST_PROFILES;  // tests/models/profiles
const std::string kThreeLayers = kProfiles + "/three_layers.json";
const std::string kShipped = PSHARD_SHIPPED_PROFILES;  // profiles/ (scripts/make_profiles.py)

ModelSpec profile_spec(const std::string& file, int64_t classes = 10) {
  ModelSpec s;
  s.name = "profile";
  s.profile = file;
  s.input_shape = {1, 1, 1};
  s.num_classes = classes;
  s.target_dim = 0;
  return s;
}

// The error message of parsing `text`, or "" when it parses.
std::string refusal(const std::string& text) {
  try {
    parse_model_profile(text, "bad.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A valid two-layer profile with `layers` (a JSON array) and `extra` top-level fields in place of the defaults.
std::string profile_text(const std::string& layers, const std::string& top = R"("batch": 8, "classes": 4)") {
  return R"({"name": "p", "source": "test", )" + top + R"(, "layers": )" + layers + "}";
}

const char* kTwoLayers =
    R"([{"name": "a", "forward_ms": 1, "backward_ms": 2, "params": [{"name": "w", "shape": [4, 3]}]},
                            {"name": "b", "forward_ms": 1, "backward_ms": 2, "params": []}])";

TEST(ProfileFile, TheFixtureReadsBackFieldByField) {
  const ModelProfile p = read_model_profile(kThreeLayers);
  EXPECT_EQ(p.origin, kThreeLayers);
  EXPECT_EQ(p.name, "three-layers");
  EXPECT_EQ(p.batch, 32);
  EXPECT_EQ(p.classes, 10);
  EXPECT_EQ(p.precision, "fp32");
  EXPECT_EQ(p.step_ms, 135);
  EXPECT_EQ(p.input_shape, (std::vector<int64_t>{1, 8, 8}));
  ASSERT_EQ(p.layers.size(), 3u);
  EXPECT_EQ(p.layers[1].name, "fc1");
  EXPECT_EQ(p.layers[1].forward_ms, 15);
  EXPECT_EQ(p.layers[1].backward_ms, 30);
  ASSERT_EQ(p.layers[1].params.size(), 2u);
  EXPECT_EQ(p.layers[1].params[0].name, "weight");
  EXPECT_EQ(p.layers[1].params[0].shape, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(p.num_params(), 8 * 9 + 8 + 64 * 512 + 64 + 10 * 64 + 10);
  EXPECT_EQ(p.forward_ms(), 45);
  EXPECT_EQ(p.backward_ms(), 90);
}

TEST(ProfileFile, AValidMinimalProfileParses) {
  const ModelProfile p = parse_model_profile(profile_text(kTwoLayers), "ok.json");
  EXPECT_EQ(p.layers.size(), 2u);
  EXPECT_EQ(p.step_ms, 0);
  EXPECT_TRUE(p.precision.empty());
  EXPECT_TRUE(p.layers[1].params.empty());
}

struct BadCase {
  const char* what;
  std::string text;
  const char* message;  // expected in the error, after "model profile bad.json: "
};

TEST(ProfileFile, BadFilesAreRefusedNamingTheFileAndTheFault) {
  const std::string layer_a = R"({"name": "a", "forward_ms": 1, "backward_ms": 2, "params": [{"name": "w", "shape": )";
  const std::vector<BadCase> cases = {
      {"not JSON", "{\"name\": ", "not valid JSON"},
      {"not an object", "[1, 2]", "expected a JSON object"},
      {"missing name", R"({"source": "s", "batch": 8, "classes": 4, "layers": [{"name": "a", "forward_ms": 1,
        "backward_ms": 1, "params": []}]})",
       "missing field \"name\""},
      {"missing source", R"({"name": "p", "batch": 8, "classes": 4, "layers": []})", "missing field \"source\""},
      {"missing batch", R"({"name": "p", "source": "s", "classes": 4, "layers": []})", "missing field \"batch\""},
      {"missing classes", R"({"name": "p", "source": "s", "batch": 8, "layers": []})", "missing field \"classes\""},
      {"missing layers", R"({"name": "p", "source": "s", "batch": 8, "classes": 4})", "missing field \"layers\""},
      {"empty source", R"({"name": "p", "source": "", "batch": 8, "classes": 4, "layers": []})", "source is empty"},
      {"unknown field", profile_text(kTwoLayers, R"("batch": 8, "classes": 4, "stepms": 3)"),
       "unknown field \"stepms\""},
      {"zero batch", profile_text(kTwoLayers, R"("batch": 0, "classes": 4)"), "batch is 0, must be >= 1"},
      {"fractional batch", profile_text(kTwoLayers, R"("batch": 2.5, "classes": 4)"), "batch is 2.5, must be a whole"},
      {"one class", profile_text(kTwoLayers, R"("batch": 8, "classes": 1)"), "classes is 1, must be >= 2"},
      {"unknown precision", profile_text(kTwoLayers, R"("batch": 8, "classes": 4, "precision": "fp64")"),
       "precision must be fp32, bf16 or fp16"},
      {"negative step", profile_text(kTwoLayers, R"("batch": 8, "classes": 4, "step_ms": -1)"),
       "step_ms is -1, must be >= 0"},
      {"step shorter than its layers", profile_text(kTwoLayers, R"("batch": 8, "classes": 4, "step_ms": 3)"),
       "the layers' forward + backward take 6 ms, more than step_ms 3"},
      {"empty layers", profile_text("[]"), "layers is empty"},
      {"layers not an array", profile_text("{}"), "layers must be an array"},
      {"layer missing a time", profile_text(R"([{"name": "a", "forward_ms": 1, "params": []}])"),
       "layers[0] (a): missing field \"backward_ms\""},
      {"negative forward", profile_text(R"([{"name": "a", "forward_ms": -0.5, "backward_ms": 1, "params": []}])"),
       "layers[0] (a): forward_ms is -0.5, must be >= 0"},
      {"negative backward", profile_text(R"([{"name": "a", "forward_ms": 1, "backward_ms": -2, "params": []}])"),
       "layers[0] (a): backward_ms is -2, must be >= 0"},
      {"time as text", profile_text(R"([{"name": "a", "forward_ms": "1", "backward_ms": 1, "params": []}])"),
       "forward_ms must be a number"},
      {"absurd time", profile_text(R"([{"name": "a", "forward_ms": 1e9, "backward_ms": 1, "params": []}])"),
       "forward_ms is 1e+09, must be <= 10000000"},
      {"duplicate layer", profile_text(R"([{"name": "a", "forward_ms": 1, "backward_ms": 1, "params": []},
                                           {"name": "a", "forward_ms": 1, "backward_ms": 1, "params": []}])"),
       "layers[1] (a): duplicate layer name \"a\""},
      {"duplicate parameter", profile_text(R"([{"name": "a", "forward_ms": 1, "backward_ms": 1, "params": [
                                               {"name": "w", "shape": [2]}, {"name": "w", "shape": [3]}]}])"),
       "layers[0] (a): params[1]: duplicate tensor name \"a.w\""},
      {"colliding tensor names", profile_text(R"([
           {"name": "a.b", "forward_ms": 1, "backward_ms": 1, "params": [{"name": "c", "shape": [2]}]},
           {"name": "a", "forward_ms": 1, "backward_ms": 1, "params": [{"name": "b.c", "shape": [2]}]}])"),
       "duplicate tensor name \"a.b.c\""},
      {"empty name", profile_text(R"([{"name": "", "forward_ms": 1, "backward_ms": 1, "params": []}])"),
       "name must have 1 to 256 characters"},
      {"name with a space", profile_text(R"([{"name": "conv 1", "forward_ms": 1, "backward_ms": 1, "params": []}])"),
       "name \"conv 1\" holds a space"},
      {"zero dimension", profile_text("[" + layer_a + "[4, 0]}]}]"), "shape [4,0] has a dimension < 1"},
      {"negative dimension", profile_text("[" + layer_a + "[-4]}]}]"), "shape [-4] has a dimension < 1"},
      {"empty shape", profile_text("[" + layer_a + "[]}]}]"), "shape must be a non-empty array"},
      {"fractional dimension", profile_text("[" + layer_a + "[1.5]}]}]"), "dimensions must be whole numbers"},
      {"absurd tensor", profile_text("[" + layer_a + "[1000000, 1000000]}]}]"), "has more than 2^31 elements"},
      {"absurd dimension", profile_text("[" + layer_a + "[1e12]}]}]"), "has a dimension above 2^31"},
      {"parameter missing its shape", profile_text(R"([{"name": "a", "forward_ms": 1, "backward_ms": 1,
                                                      "params": [{"name": "w"}]}])"),
       "params[0]: missing field \"shape\""},
      {"params not an array", profile_text(R"([{"name": "a", "forward_ms": 1, "backward_ms": 1, "params": 3}])"),
       "params must be an array"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string what = refusal(c.text);
    EXPECT_EQ(what.rfind("model profile bad.json: ", 0), 0u) << what;
    EXPECT_NE(what.find(c.message), std::string::npos) << what;
  }
}

TEST(ProfileFile, AModelAbove2To33ParametersIsRefused) {
  std::string layers = "[";
  for (int i = 0; i < 5; ++i) {
    layers += std::string(i ? "," : "") + R"({"name": "l)" + std::to_string(i) +
              R"(", "forward_ms": 1, "backward_ms": 1, "params": [{"name": "w", "shape": [65536, 32768]}]})";
  }
  EXPECT_NE(refusal(profile_text(layers + "]")).find("layers[4] (l4): params[0]: the model passes 2^33 parameters"),
            std::string::npos);
}

TEST(ProfileFile, AMissingFileIsAnErrorNamingIt) {
  try {
    read_model_profile(kProfiles + "/no_such_profile.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_profile.json: cannot open"), std::string::npos) << e.what();
  }
}

TEST(ShippedProfiles, EachHasItsArchitecturesParameterCount) {
  struct Shipped {
    const char* file;
    int64_t params, classes, batch;
    size_t layers;
  };
  // torchvision's resnet50() and vgg16(); resnet18(num_classes=10) with a 3x3 stem; HuggingFace's BertModel with
  // its pooler (bert-base-uncased: 109,482,240).
  for (const Shipped& s :
       {Shipped{"resnet50.json", 25557032, 1000, 64, 107}, Shipped{"vgg16.json", 138357544, 1000, 64, 16},
        Shipped{"resnet18_cifar.json", 11173962, 10, 128, 41}, Shipped{"bert_base.json", 109482240, 2, 32, 50}}) {
    SCOPED_TRACE(s.file);
    const ModelProfile p = read_model_profile(kShipped + "/" + s.file);
    EXPECT_EQ(p.num_params(), s.params);
    EXPECT_EQ(p.classes, s.classes);
    EXPECT_EQ(p.batch, s.batch);
    EXPECT_EQ(p.layers.size(), s.layers);
    EXPECT_NEAR(p.forward_ms() + p.backward_ms(), p.step_ms, 1e-3);
    EXPECT_NEAR(p.backward_ms(), 2 * p.forward_ms(), 1e-3);
    EXPECT_NE(p.source.find("scripts/make_profiles.py"), std::string::npos);
  }
  // The model built from one has the same tensors: ResNet-50's 161 (53 convolutions, 53 batch norms x 2, fc x 2).
  CpuBackend cpu(1);
  ModelSpec spec = profile_spec(kShipped + "/resnet50.json", 1000);
  auto model = Model::create(spec, cpu);
  EXPECT_EQ(model->num_params_elems(), 25557032);
  EXPECT_EQ(model->params().size(), 161u);
  EXPECT_EQ(model->params().front().name, "conv1.weight");
  EXPECT_EQ(model->params().back().name, "fc.bias");
  EXPECT_EQ(model->params()[3].name, "layer1.0.conv1.weight");  // after conv1.weight, bn1.weight, bn1.bias
}

TEST(ProfileModel, LayersAndTensorsAreTheProfiles) {
  CpuBackend cpu(1);
  auto model = Model::create(profile_spec(kThreeLayers), cpu);
  ASSERT_EQ(model->num_layers(), 3);
  EXPECT_EQ(model->layer_name(0), "conv1");
  EXPECT_EQ(model->layer_name(2), "fc2");
  EXPECT_STREQ(model->layer(1).type(), "Profile");
  std::vector<std::string> names;
  for (const ParamRef& p : model->params()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv1.weight", "conv1.bias", "fc1.weight", "fc1.bias", "fc2.weight",
                                             "fc2.bias"}));
  EXPECT_EQ(model->params()[2].shape, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(model->params()[2].layer, 1);
  EXPECT_EQ(model->num_params_elems(), read_model_profile(kThreeLayers).num_params());
  EXPECT_EQ(model->layer(2).output_shape(), (std::vector<int64_t>{10}));
}

TEST(ProfileModel, ForwardAndBackwardSleepTheLayersTimesScaledToTheBatch) {
  using Clock = std::chrono::steady_clock;
  CpuBackend cpu(1);
  auto model = Model::create(profile_spec(kThreeLayers), cpu);
  model->init_params(1);
  // 16 samples at a profile batch of 32: half of 45 ms forward and 90 ms backward.
  const int64_t n = 16;
  std::vector<float> x(n, 0.5f);
  std::vector<int32_t> labels(n, 3);
  const auto t0 = Clock::now();
  const StepResult r = model->forward(x.data(), n, labels.data(), nullptr, /*train=*/true);
  const auto t1 = Clock::now();
  model->backward();
  const auto t2 = Clock::now();
  const double forward_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const double backward_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  // Paced sleeps (ProfilePace): from the first layer's forward on, at least the sum of the times has passed.
  EXPECT_GE(forward_ms, 22.5);
  EXPECT_GE(forward_ms + backward_ms, 22.5 + 45.0);
  // A sleep ends late by the scheduler's wake-up delay only: generous bounds for a loaded machine.
  EXPECT_LT(forward_ms, 22.5 + 100);
  EXPECT_LT(backward_ms, 45.0 + 100);
  // Zero logits: the loss of every sample is ln(classes).
  EXPECT_EQ(r.n, n);
  EXPECT_NEAR(r.loss_sum / n, std::log(10.0), 1e-5);
  EXPECT_EQ(model->output().shape(), (std::vector<int64_t>{n, 10}));
}

TEST(ProfileModel, GradientsAreSmallFiniteDeterministicAndStayInPlace) {
  CpuBackend cpu(1);
  auto a = Model::create(profile_spec(kThreeLayers), cpu);
  auto b = Model::create(profile_spec(kThreeLayers), cpu);
  const int64_t n = 1;
  std::vector<float> x(n, 0.5f);
  std::vector<int32_t> labels(n, 3);
  auto step = [&](Model& m) {
    m.forward(x.data(), n, labels.data(), nullptr, /*train=*/true);
    m.backward();
  };
  auto grads = [](const Model& m) {
    std::vector<std::vector<float>> g;
    for (const ParamRef& p : m.params()) g.emplace_back(p.grad, p.grad + p.numel);
    return g;
  };
  a->init_params(7);
  b->init_params(7);
  step(*a);
  step(*b);
  const std::vector<std::vector<float>> first = grads(*a);
  EXPECT_EQ(first, grads(*b));  // same seed, same values
  for (size_t i = 0; i < first.size(); ++i) {
    SCOPED_TRACE(a->params()[i].name);
    bool nonzero = false;
    for (float v : first[i]) {
      ASSERT_TRUE(std::isfinite(v));
      ASSERT_LE(std::fabs(v), 1e-3f);
      nonzero = nonzero || v != 0.0f;
    }
    EXPECT_TRUE(nonzero);
  }
  EXPECT_NE(first[0], std::vector<float>(first[0].size(), first[0][0]));  // not one constant
  step(*a);
  EXPECT_EQ(grads(*a), first);  // the second backward leaves them as they are
  // init_params zeroes the gradients; the next backward writes them again, from the seed.
  a->init_params(7);
  EXPECT_EQ(grads(*a)[2], std::vector<float>(first[2].size(), 0.0f));
  step(*a);
  EXPECT_EQ(grads(*a), first);
  b->init_params(8);
  step(*b);
  EXPECT_NE(grads(*b), first);  // another seed, other values
}

TEST(ProfileModel, SpecsThatDoNotFitAreClearErrors) {
  CpuBackend cpu(1);
  auto error_of = [&](const ModelSpec& spec) {
    try {
      Model::create(spec, cpu);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of(profile_spec("")).find("model profile needs model.profile = FILE"), std::string::npos);
  EXPECT_NE(error_of(profile_spec(kThreeLayers, 1000))
                .find("the profile has 10 classes but the data set has 1000 "
                      "(set data.classes = 10)"),
            std::string::npos);
  ModelSpec regression = profile_spec(kThreeLayers, 0);
  regression.target_dim = 1;
  EXPECT_NE(error_of(regression).find("is a classifier"), std::string::npos);
  EXPECT_NE(error_of(profile_spec(kProfiles + "/missing.json")).find("missing.json: cannot open"), std::string::npos);
}

}  // namespace
}  // namespace pshard::models
