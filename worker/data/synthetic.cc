// Synthetic regression and image data sets (deterministic, portable random numbers).
#include "worker/data/synthetic.h"

#include <cmath>
#include <string>

#include "common/error.h"

namespace pshard::data {

namespace {

// Stream ids keep the truth, train and test draws independent of each other.
constexpr uint64_t kTruthStream = 0x7472757468, kTrainStream = 0x747261696e, kTestStream = 0x74657374;

Dataset make_regression_split(const SyntheticRegression& truth, int64_t n, double noise, uint64_t seed,
                              const std::string& split) {
  int64_t f = static_cast<int64_t>(truth.w.size());
  Dataset d;
  d.name = "synthetic-regression";
  d.sample_shape = {f};
  d.target_dim = 1;
  d.features.resize(static_cast<size_t>(n * f));
  d.targets.resize(static_cast<size_t>(n));
  PortableRng rng(mix_seed(seed, split == "train" ? kTrainStream : kTestStream));
  for (int64_t i = 0; i < n; ++i) {
    double y = truth.b;
    float* x = d.features.data() + i * f;
    for (int64_t j = 0; j < f; ++j) {
      x[j] = static_cast<float>(rng.normal());
      y += static_cast<double>(x[j]) * truth.w[static_cast<size_t>(j)];
    }
    d.targets[static_cast<size_t>(i)] = static_cast<float>(y + noise * rng.normal());
  }
  return d;
}

Dataset make_images_split(const std::vector<float>& templates, int64_t n, const std::vector<int64_t>& shape,
                          int64_t classes, uint64_t seed, const std::string& split) {
  Dataset d;
  d.name = "synthetic-images";
  d.sample_shape = shape;
  d.num_classes = classes;
  int64_t elems = d.sample_elems();
  d.features.resize(static_cast<size_t>(n * elems));
  d.labels.resize(static_cast<size_t>(n));
  PortableRng rng(mix_seed(seed, split == "train" ? kTrainStream : kTestStream));
  for (int64_t i = 0; i < n; ++i) {
    int32_t label = static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(classes));
    d.labels[static_cast<size_t>(i)] = label;
    const float* t = templates.data() + label * elems;
    float* x = d.features.data() + i * elems;
    for (int64_t j = 0; j + 1 < elems; j += 2) {  // two 32-bit uniforms per draw
      uint64_t r = rng.next_u64();
      x[j] = 0.5f * t[j] + static_cast<float>(static_cast<uint32_t>(r)) * (2.0f / 4294967296.0f) - 1.0f;
      x[j + 1] = 0.5f * t[j + 1] + static_cast<float>(static_cast<uint32_t>(r >> 32)) * (2.0f / 4294967296.0f) - 1.0f;
    }
    if (elems % 2 == 1) x[elems - 1] = 0.5f * t[elems - 1] + static_cast<float>(rng.uniform() * 2 - 1);
  }
  return d;
}

}  // namespace

SyntheticRegression synthetic_regression_truth(int64_t features, uint64_t seed) {
  if (features < 1) throw Error("data.features must be >= 1, got " + std::to_string(features));
  PortableRng rng(mix_seed(seed, kTruthStream));
  SyntheticRegression truth;
  truth.w.resize(static_cast<size_t>(features));
  for (float& w : truth.w) w = static_cast<float>(rng.normal());
  truth.b = static_cast<float>(rng.normal());
  return truth;
}

DataSplits make_synthetic_regression(int64_t train_size, int64_t test_size, int64_t features, double noise,
                                     uint64_t seed) {
  SyntheticRegression truth = synthetic_regression_truth(features, seed);
  DataSplits s;
  s.train = make_regression_split(truth, train_size, noise, seed, "train");
  s.test = make_regression_split(truth, test_size, noise, seed, "test");
  return s;
}

DataSplits make_synthetic_images(int64_t train_size, int64_t test_size, const std::vector<int64_t>& shape,
                                 int64_t classes, uint64_t seed) {
  if (shape.size() != 3) {
    throw Error("data.image_shape must be [C, H, W], got " + std::to_string(shape.size()) + " numbers");
  }
  if (classes < 2) throw Error("data.classes must be >= 2, got " + std::to_string(classes));
  int64_t elems = shape[0] * shape[1] * shape[2];
  std::vector<float> templates(static_cast<size_t>(classes * elems));
  PortableRng rng(mix_seed(seed, kTruthStream));
  for (float& t : templates) t = static_cast<float>(rng.normal());
  DataSplits s;
  s.train = make_images_split(templates, train_size, shape, classes, seed, "train");
  s.test = make_images_split(templates, test_size, shape, classes, seed, "test");
  return s;
}

}  // namespace pshard::data
