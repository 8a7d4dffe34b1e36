// CIFAR-10 binary reader on small files written by the test, and its errors.
#include "worker/data/cifar10.h"

#include <gtest/gtest.h>

#include "common/config/config.h"
#include "tests/worker/data/temp_dir.h"

namespace pshard::data {
namespace {

using testing::error_of;
using testing::TempDir;

constexpr size_t kPix = 3072;

// Record r of batch file f: label (f + r) % 10, pixel p = (f*31 + r*7 + p) % 256.
void write_batch(const std::string& path, int f, int records, std::vector<uint8_t>* all_labels,
                 std::vector<uint8_t>* all_pixels) {
  std::vector<uint8_t> labels, pixels;
  for (int r = 0; r < records; ++r) {
    labels.push_back(static_cast<uint8_t>((f + r) % 10));
    for (size_t p = 0; p < kPix; ++p) pixels.push_back(static_cast<uint8_t>((f * 31 + r * 7 + p) % 256));
  }
  write_cifar10_file(path, labels, pixels);
  all_labels->insert(all_labels->end(), labels.begin(), labels.end());
  all_pixels->insert(all_pixels->end(), pixels.begin(), pixels.end());
}

TEST(Cifar10, ReadsWrittenBatchesInOrder) {
  TempDir dir;
  std::vector<uint8_t> labels, pixels, test_labels, test_pixels;
  for (int f = 1; f <= 5; ++f)
    write_batch(dir.file("data_batch_" + std::to_string(f) + ".bin"), f, 3, &labels, &pixels);
  write_batch(dir.file("test_batch.bin"), 9, 4, &test_labels, &test_pixels);

  Dataset train = load_cifar10_split(dir.path(), "train", 0, /*normalize=*/false);
  ASSERT_EQ(train.size(), 15);
  EXPECT_EQ(train.sample_shape, (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(train.num_classes, 10);
  EXPECT_EQ(std::vector<int32_t>(labels.begin(), labels.end()), train.labels);
  for (size_t i = 0; i < pixels.size(); ++i) ASSERT_FLOAT_EQ(train.features[i], pixels[i] / 255.0f) << i;

  // Normalisation is per channel: pixel p of a sample lies in channel p / 1024.
  Dataset test = load_cifar10_split(dir.path(), "test", 0, /*normalize=*/true);
  ASSERT_EQ(test.size(), 4);
  const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, stdev[3] = {0.2470f, 0.2435f, 0.2616f};
  for (size_t i = 0; i < test_pixels.size(); ++i) {
    size_t c = (i % kPix) / 1024;
    ASSERT_NEAR(test.features[i], (test_pixels[i] / 255.0f - mean[c]) / stdev[c], 1e-5) << i;
  }

  // A limit stops inside the second file; load_data accepts the parent folder too.
  Dataset some = load_cifar10_split(dir.path(), "train", 4, false);
  EXPECT_EQ(some.size(), 4);
  EXPECT_EQ(some.labels, (std::vector<int32_t>{1, 2, 3, 2}));
  Config cfg = Config::defaults();
  cfg.set("data.name=cifar10");
  cfg.set("data.dir=" + dir.path());
  cfg.set("data.train_size=7");
  DataSplits s = load_data(cfg);
  EXPECT_EQ(s.train.size(), 7);
  EXPECT_EQ(s.test.size(), 4);
}

TEST(Cifar10, TruncatedRecordAndBadLabel) {
  TempDir dir;
  std::vector<uint8_t> labels, pixels;
  std::string path = dir.file("test_batch.bin");
  write_batch(path, 0, 3, &labels, &pixels);
  std::string bytes = testing::read_all(path);
  testing::write_all(path, bytes.substr(0, 2 * 3073 + 100));
  std::string e = error_of([&] { load_cifar10_split(dir.path(), "test", 0, false); });
  EXPECT_NE(e.find(path + ": truncated at byte 6246"), std::string::npos) << e;
  EXPECT_NE(e.find("record 2 starting at byte 6146"), std::string::npos) << e;

  bytes[3073] = 10;  // label of record 1
  testing::write_all(path, bytes);
  e = error_of([&] { load_cifar10_split(dir.path(), "test", 0, false); });
  EXPECT_NE(e.find(path + ": label 10 at byte 3073"), std::string::npos) << e;

  e = error_of([&] { load_cifar10_split(dir.path(), "train", 0, false); });
  EXPECT_NE(e.find("data_batch_1.bin does not exist"), std::string::npos) << e;
}

}  // namespace
}  // namespace pshard::data
