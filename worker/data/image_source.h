// Dataset samples decoded on demand from encoded images (files of a folder or records of a packed file).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "worker/data/dataset.h"
#include "worker/data/image_transform.h"
#include "worker/data/loop_pool.h"

namespace pshard::data {

// Reads a whole file; an Error naming it when it cannot be read.
std::vector<uint8_t> read_file_bytes(const std::string& path);

// Where the encoded bytes (JPEG or PNG) of image i come from. Thread-safe.
class EncodedImages {
 public:
  virtual ~EncodedImages() = default;
  virtual int64_t size() const = 0;
  // The bytes of image i; an Error naming it when they cannot be read.
  virtual std::vector<uint8_t> bytes(int64_t i) const = 0;
  // What errors call image i: its path, or "FILE record N".
  virtual std::string name(int64_t i) const = 0;
};

// Images that are files.
class ImageFiles : public EncodedImages {
 public:
  explicit ImageFiles(std::vector<std::string> paths) : paths_(std::move(paths)) {}
  int64_t size() const override { return static_cast<int64_t>(paths_.size()); }
  std::vector<uint8_t> bytes(int64_t i) const override { return read_file_bytes(name(i)); }
  std::string name(int64_t i) const override { return paths_.at(static_cast<size_t>(i)); }

 private:
  std::vector<std::string> paths_;
};

// How samples are made from decoded images.
struct ImageTransform {
  int image_size = 224;  // output side: samples are {3, image_size, image_size}
  int resize = 256;      // evaluation: shorter side resized to this before the centre crop
  bool augment = true;   // random resized crop + horizontal flip (training); false: evaluation transform
  ChannelStats stats;    // normalisation
  uint64_t seed = 0;     // augmentation draws depend on (seed, epoch, sample index) only
  int threads = 2;       // decode threads per batch
};

// Samples of a Dataset decoded on demand (Dataset::source): the images of
// each batch are shared out among transform.threads threads (the caller of
// fill, e.g. the loader's prefetch thread, and a pool of threads - 1 helpers
// started with the source). Sample i
// of epoch e is the same floats whatever the thread count, batch or worker
// that makes it. An image that fails to decode is an Error naming it.
class ImageSource : public SampleSource {
 public:
  ImageSource(std::shared_ptr<const EncodedImages> images, ImageTransform transform);
  ImageSource(std::vector<std::string> paths, ImageTransform transform)
      : ImageSource(std::make_shared<ImageFiles>(std::move(paths)), transform) {}
  void fill(const int64_t* indices, int64_t n, int64_t epoch, float* out) const override;
  // Decodes and transforms one sample (used by fill and by the tests).
  void make_sample(int64_t index, int64_t epoch, float* out) const;

 private:
  std::shared_ptr<const EncodedImages> images_;
  ImageTransform t_;
  std::unique_ptr<LoopPool> pool_;
};

}  // namespace pshard::data
