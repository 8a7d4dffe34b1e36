// Dataset helpers and load_data(): dispatch on data.name.
#include "worker/data/dataset.h"

#include <fstream>

#include "common/error.h"
#include "worker/data/cifar10.h"
#include "worker/data/criteo.h"
#include "worker/data/idx.h"
#include "worker/data/image_folder.h"
#include "worker/data/packed.h"
#include "worker/data/synthetic.h"
#include "worker/data/synthetic_ctr.h"

namespace pshard::data {

int64_t Dataset::sample_elems() const {
  int64_t e = 1;
  for (int64_t d : sample_shape) e *= d;
  return e;
}

int64_t Dataset::size() const {
  if (source) return static_cast<int64_t>(labels.size());
  int64_t e = sample_elems();
  return e > 0 ? static_cast<int64_t>(features.size()) / e : 0;
}

void Dataset::check_consistent(const std::string& where) const {
  int64_t e = sample_elems();
  if (sample_shape.empty() || e <= 0) throw Error(where + ": data set '" + name + "' has an empty sample shape");
  if (source && !features.empty()) throw Error(where + ": data set '" + name + "' has both a source and features");
  if (static_cast<int64_t>(features.size()) % e != 0) {
    throw Error(where + ": " + std::to_string(features.size()) + " feature values are not a multiple of the sample " +
                "size " + std::to_string(e));
  }
  int64_t n = size();
  if (num_classes > 0 && static_cast<int64_t>(labels.size()) != n) {
    throw Error(where + ": " + std::to_string(labels.size()) + " labels for " + std::to_string(n) + " samples");
  }
  if (target_dim > 0 && static_cast<int64_t>(targets.size()) != n * target_dim) {
    throw Error(where + ": " + std::to_string(targets.size()) + " target values for " + std::to_string(n) +
                " samples of " + std::to_string(target_dim));
  }
  if (static_cast<int64_t>(ids.size()) != n * id_fields || static_cast<int64_t>(table_rows.size()) != id_fields) {
    throw Error(where + ": " + std::to_string(ids.size()) + " categorical ids and " +
                std::to_string(table_rows.size()) + " tables for " + std::to_string(n) + " samples of " +
                std::to_string(id_fields) + " fields");
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint64_t rows = table_rows[i % static_cast<size_t>(id_fields)];
    if (rows > 0 && ids[i] >= rows) {  // 0: any id (a hashed table's)
      throw Error(where + ": sample " + std::to_string(i / static_cast<size_t>(id_fields)) + " field " +
                  std::to_string(i % static_cast<size_t>(id_fields)) + " has id " + std::to_string(ids[i]) +
                  ", outside its table of " + std::to_string(rows) + " rows");
    }
  }
}

Normalization image_normalization(const std::string& dataset_name) {
  if (dataset_name == "fashion-mnist") return {{0.2860f}, {0.3530f}};
  if (dataset_name == "mnist") return {{0.1307f}, {0.3081f}};
  if (dataset_name == "cifar10") return {{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}};
  throw Error("no image normalisation is known for data set '" + dataset_name + "'");
}

void pixels_to_features(const uint8_t* pixels, int64_t samples, int64_t channels, int64_t pixels_per_channel,
                        const Normalization& norm, float* out) {
  // One lookup table per channel: 256 entries instead of a divide per pixel.
  std::vector<float> table(static_cast<size_t>(256 * channels));
  for (int64_t c = 0; c < channels; ++c) {
    float mean = norm.mean.empty() ? 0.0f : norm.mean[static_cast<size_t>(c)];
    float std = norm.std.empty() ? 1.0f : norm.std[static_cast<size_t>(c)];
    for (int v = 0; v < 256; ++v)
      table[static_cast<size_t>(c * 256 + v)] = (static_cast<float>(v) / 255.0f - mean) / std;
  }
  for (int64_t i = 0; i < samples; ++i) {
    for (int64_t c = 0; c < channels; ++c) {
      const float* t = table.data() + c * 256;
      int64_t base = (i * channels + c) * pixels_per_channel;
      for (int64_t p = 0; p < pixels_per_channel; ++p) out[base + p] = t[pixels[base + p]];
    }
  }
}

namespace {

std::string cifar_dir(const std::string& dir) {
  // Accept the folder the archive unpacks into as well as its parent.
  if (!std::ifstream(dir + "/data_batch_1.bin").good() &&
      std::ifstream(dir + "/cifar-10-batches-bin/data_batch_1.bin").good()) {
    return dir + "/cifar-10-batches-bin";
  }
  return dir;
}

int64_t or_default(int64_t v, int64_t def) { return v > 0 ? v : def; }

}  // namespace

DataSplits load_data(const Config& cfg) {
  std::string name = cfg.get_string("data.name");
  std::string dir = cfg.get_string("data.dir");
  int64_t train_size = cfg.get_int("data.train_size");
  int64_t test_size = cfg.get_int("data.test_size");
  bool normalize = cfg.get_bool("data.normalize");
  uint64_t seed = static_cast<uint64_t>(cfg.get_int("run.seed"));
  DataSplits s;
  if (name == "fashion-mnist" || name == "mnist") {
    s.train = load_idx_split(dir, "train", name, train_size, normalize);
    s.test = load_idx_split(dir, "test", name, test_size, normalize);
  } else if (name == "cifar10") {
    std::string d = cifar_dir(dir);
    s.train = load_cifar10_split(d, "train", train_size, normalize);
    s.test = load_cifar10_split(d, "test", test_size, normalize);
  } else if (name == "synthetic-regression") {
    s = make_synthetic_regression(or_default(train_size, kSyntheticRegressionTrain),
                                  or_default(test_size, kSyntheticRegressionTest), cfg.get_int("data.features"),
                                  cfg.get_double("data.noise"), seed);
  } else if (name == "synthetic-images") {
    s = make_synthetic_images(or_default(train_size, kSyntheticImagesTrain),
                              or_default(test_size, kSyntheticImagesTest), cfg.get_int_list("data.image_shape"),
                              cfg.get_int("data.classes"), seed);
  } else if (name == "synthetic-ctr") {
    s = make_synthetic_ctr_splits(cfg, or_default(train_size, kSyntheticCtrTrain),
                                  or_default(test_size, kSyntheticCtrTest));
  } else if (name == "criteo") {
    s = load_criteo_splits(cfg);
  } else if (name == "packed") {
    std::string train_path = cfg.get_string("data.train_path");
    std::string test_path = cfg.get_string("data.test_path");
    if (train_path.empty() || test_path.empty()) {
      throw Error(cfg.origin() + ": data.name = packed needs data.train_path and data.test_path " +
                  "(files written by `pshard data convert`)");
    }
    if (read_packed_info(train_path).encoded_images) {
      s = load_packed_images(cfg);
      s.train.check_consistent(name + " train split");
      s.test.check_consistent(name + " test split");
      return s;
    }
    s.train = read_packed(train_path, train_size);
    s.test = read_packed(test_path, test_size);
    if (s.train.sample_shape != s.test.sample_shape || s.train.num_classes != s.test.num_classes ||
        s.train.target_dim != s.test.target_dim) {
      throw Error(train_path + " and " + test_path + " disagree on the sample shape, classes or targets");
    }
  } else if (name == "image-folder") {
    s = load_image_folder(cfg);
  } else {
    throw Error(cfg.origin() + ": data.name '" + name + "' is not a known data set");
  }
  s.train.check_consistent(name + " train split");
  s.test.check_consistent(name + " test split");
  return s;
}

}  // namespace pshard::data
