// An in-memory data set (features, labels or targets) and load_data(), which reads the one a config names.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/config/config.h"

namespace pshard::data {

// Samples made on demand rather than held in Dataset::features: images
// decoded (and augmented) from their files when a batch is assembled.
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // Writes samples indices[0, n) of epoch `epoch` to out (n * sample elems
  // floats). A sample depends only on (its index, epoch), never on which
  // batch or thread makes it. Thread-safe.
  virtual void fill(const int64_t* indices, int64_t n, int64_t epoch, float* out) const = 0;
};

// Samples held in memory, ready to batch.
//
// Images are float32 NCHW, one sample = sample_shape {C, H, W}. Pixels are
// scaled to [0, 1] and then, unless data.normalize = false, normalised per
// channel as (x - mean[c]) / std[c] with the FIXED statistics of the data
// set's full training split (image_normalization() below), so that train and
// test, and any train_size, get the very same transform.
// Vectors (synthetic regression) have sample_shape {F}.
//
//   DataSplits d = load_data(Config::from_file("configs/fmnist_mlp.toml"));
//   const float* x7 = d.train.sample(7);          // d.train.sample_elems() floats
//   int32_t y7 = d.train.labels[7];
struct Dataset {
  std::string name;                   // "fashion-mnist", "cifar10", ...
  std::vector<int64_t> sample_shape;  // {C,H,W} images, {F} vectors
  int64_t num_classes = 0;            // 0 = regression
  int64_t target_dim = 0;             // regression targets per sample (1 for linreg)
  std::vector<float> features;        // size() * sample_elems()
  std::vector<int32_t> labels;        // size() entries when num_classes > 0
  std::vector<float> targets;         // size() * target_dim when target_dim > 0
  // When set, samples come from here and features is empty; labels then hold
  // one entry per sample and give size() (image-folder).
  std::shared_ptr<const SampleSource> source;
  // Click data (synthetic-ctr): besides its dense features, each sample has one categorical id per field, looked up
  // in that field's embedding table, whose rows only the servers hold. ids: size() * id_fields, row-major;
  // table_rows: id_fields entries, field f's ids lie in [0, table_rows[f]) (0: any 64-bit id, unbucketed Criteo
  // values). click_prob: the true probability of label 1 per sample of the test split, when the data's maker knows it
  // (synthetic-ctr).
  int64_t id_fields = 0;
  std::vector<uint64_t> ids;
  std::vector<uint64_t> table_rows;
  std::vector<float> click_prob;

  int64_t sample_elems() const;  // product of sample_shape
  int64_t size() const;          // number of samples
  // In-memory data sets only (source == nullptr).
  const float* sample(int64_t i) const { return features.data() + i * sample_elems(); }
  const uint64_t* id_row(int64_t i) const { return ids.data() + i * id_fields; }
  // Error (naming `where`) when the vectors' sizes disagree with the shape.
  void check_consistent(const std::string& where) const;
};

struct DataSplits {
  Dataset train, test;
};

// Reads or makes the data set named by data.name:
//   fashion-mnist, mnist   IDX files in data.dir ({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz])
//   cifar10                data_batch_1..5.bin and test_batch.bin in data.dir
//   synthetic-regression   y = X w + b + noise (see synthetic.h), data.features, data.noise
//   synthetic-images       class templates + noise of shape data.image_shape, data.classes
//   synthetic-ctr          click data (synthetic_ctr.h): data.fields Zipf-distributed ids of data.cardinality each,
//                          data.dense_features, labels 0/1 (two classes) from a hidden factor model
//   packed                 data.train_path / data.test_path written by `pshard data convert`
//   image-folder           data.dir of class sub-folders of JPEG/PNG files (image_folder.h), decoded per batch
// data.train_size / data.test_size keep the first N samples (0: all; for the
// synthetic sets: how many to make, 0 = the defaults of synthetic.h).
// Every unreadable, truncated or inconsistent file is an Error naming the file and byte offset.
DataSplits load_data(const Config& cfg);

// Per-channel mean and std (of pixels scaled to [0,1]) of a data set's
// training split, as published for it: fashion-mnist 0.2860/0.3530,
// mnist 0.1307/0.3081, cifar10 (0.4914,0.4822,0.4465)/(0.2470,0.2435,0.2616).
struct Normalization {
  std::vector<float> mean, std;
};
Normalization image_normalization(const std::string& dataset_name);

// Converts bytes (CHW order per sample) to floats: x/255, then normalised
// with `norm` when it is non-empty (one mean/std per channel).
void pixels_to_features(const uint8_t* pixels, int64_t samples, int64_t channels, int64_t pixels_per_channel,
                        const Normalization& norm, float* out);

}  // namespace pshard::data
