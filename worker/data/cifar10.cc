// CIFAR-10 binary batch reader and writer.
#include "worker/data/cifar10.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/error.h"
#include "worker/data/byte_source.h"

namespace pshard::data {
namespace {

constexpr int64_t kPixels = kCifarRecordBytes - 1;

// Appends up to `want` records (want <= 0: all) of `path` to labels/pixels.
void read_cifar_file(const std::string& path, int64_t want, std::vector<uint8_t>* labels,
                     std::vector<uint8_t>* pixels) {
  ByteSource in(path);
  std::vector<uint8_t> record(kCifarRecordBytes);
  for (int64_t r = 0; want <= 0 || r < want; ++r) {
    uint64_t start = in.offset();
    size_t got = in.read_some(record.data(), record.size());
    if (got == 0) {
      if (r == 0) throw Error(path + ": empty file: expected records of 3073 bytes (1 label + 3x32x32 pixels)");
      return;
    }
    if (got != record.size()) {
      throw Error(path + ": truncated at byte " + std::to_string(start + got) + ": record " + std::to_string(r) +
                  " starting at byte " + std::to_string(start) + " has " + std::to_string(got) +
                  " of 3073 bytes (1 label + 3x32x32 pixels)");
    }
    if (record[0] > 9) {
      throw Error(path + ": label " + std::to_string(record[0]) + " at byte " + std::to_string(start) + " (record " +
                  std::to_string(r) + ") is not a class 0..9");
    }
    labels->push_back(record[0]);
    pixels->insert(pixels->end(), record.begin() + 1, record.end());
  }
}

}  // namespace

Dataset load_cifar10_split(const std::string& dir, const std::string& split, int64_t max_samples, bool normalize) {
  std::vector<std::string> files;
  if (split == "train") {
    for (int i = 1; i <= 5; ++i) files.push_back(dir + "/data_batch_" + std::to_string(i) + ".bin");
  } else {
    files.push_back(dir + "/test_batch.bin");
  }
  std::vector<uint8_t> labels, pixels;
  for (const std::string& f : files) {
    int64_t have = static_cast<int64_t>(labels.size());
    if (max_samples > 0 && have >= max_samples) break;
    if (!std::ifstream(f).good()) {
      throw Error("data.dir " + dir + ": " + f + " does not exist (CIFAR-10 binary version: data_batch_1..5.bin, " +
                  "test_batch.bin)");
    }
    read_cifar_file(f, max_samples > 0 ? max_samples - have : 0, &labels, &pixels);
  }
  Dataset d;
  d.name = "cifar10";
  d.sample_shape = {3, 32, 32};
  d.num_classes = 10;
  int64_t n = static_cast<int64_t>(labels.size());
  d.labels.assign(labels.begin(), labels.end());
  d.features.resize(pixels.size());
  Normalization norm = normalize ? image_normalization("cifar10") : Normalization{};
  pixels_to_features(pixels.data(), n, 3, 32 * 32, norm, d.features.data());
  return d;
}

void write_cifar10_file(const std::string& path, const std::vector<uint8_t>& labels,
                        const std::vector<uint8_t>& pixels) {
  if (pixels.size() != labels.size() * kPixels) {
    throw Error(path + ": " + std::to_string(labels.size()) + " labels need " +
                std::to_string(labels.size() * kPixels) + " pixel bytes, got " + std::to_string(pixels.size()));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path + ": cannot create: " + std::strerror(errno));
  for (size_t i = 0; i < labels.size(); ++i) {
    out.put(static_cast<char>(labels[i]));
    out.write(reinterpret_cast<const char*>(pixels.data() + i * kPixels), kPixels);
  }
  if (!out.flush()) throw Error(path + ": write failed");
}

}  // namespace pshard::data
