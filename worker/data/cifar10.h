// CIFAR-10 binary format: records of 1 label byte + 3072 pixel bytes (3x32x32, channel-major).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "worker/data/dataset.h"

namespace pshard::data {

constexpr int64_t kCifarRecordBytes = 1 + 3 * 32 * 32;

// Loads the "train" split (data_batch_1.bin .. data_batch_5.bin, in that
// order) or the "test" split (test_batch.bin) from `dir`. max_samples > 0
// stops after the first N records (later batch files are then not opened).
// A file whose size is not a multiple of 3073 bytes, or a label > 9, is an
// Error naming the file and byte offset.
//
//   Dataset train = load_cifar10_split("/data/cifar-10-batches-bin", "train", 0, true);
//   // train.size() == 50000, train.sample_shape == {3, 32, 32}
Dataset load_cifar10_split(const std::string& dir, const std::string& split, int64_t max_samples, bool normalize);

// Writes records (label, 3072 CHW pixel bytes) in the CIFAR-10 binary format.
void write_cifar10_file(const std::string& path, const std::vector<uint8_t>& labels,
                        const std::vector<uint8_t>& pixels);

}  // namespace pshard::data
