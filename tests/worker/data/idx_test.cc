// IDX reading: round trips (plain and gzip), the real Fashion-MNIST, and errors that name the file and byte offset.
#include "worker/data/idx.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>

#include "common/config/config.h"
#include "tests/worker/data/temp_dir.h"
#include "worker/data/dataset.h"

namespace pshard::data {
namespace {

using testing::error_of;
using testing::TempDir;

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = static_cast<uint8_t>(seed >> 24);
  }
  return v;
}

// Writes a 5-image 4x3 MNIST-style split into dir with the given suffix ("" or ".gz").
void write_split(const TempDir& dir, const std::string& prefix, const std::string& suffix, int n,
                 std::vector<uint8_t>* pixels, std::vector<uint8_t>* labels) {
  *pixels = pattern(static_cast<size_t>(n) * 12, 7u + static_cast<uint32_t>(n));
  labels->resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) (*labels)[static_cast<size_t>(i)] = static_cast<uint8_t>((i * 3) % 10);
  write_idx(dir.file(prefix + "-images-idx3-ubyte" + suffix), {n, 4, 3}, *pixels);
  write_idx(dir.file(prefix + "-labels-idx1-ubyte" + suffix), {n}, *labels);
}

TEST(Idx, RoundTripPlainAndGzip) {
  TempDir dir;
  std::vector<uint8_t> data = pattern(2 * 3 * 5, 1);
  for (const std::string name : {"a.idx", "a.idx.gz"}) {
    write_idx(dir.file(name), {2, 3, 5}, data);
    IdxArray got = read_idx(dir.file(name), 3);
    EXPECT_EQ(got.dims, (std::vector<int64_t>{2, 3, 5})) << name;
    EXPECT_EQ(got.data, data) << name;
    IdxArray first = read_idx(dir.file(name), 3, 1);
    EXPECT_EQ(first.dims, (std::vector<int64_t>{1, 3, 5})) << name;
    EXPECT_EQ(first.data, std::vector<uint8_t>(data.begin(), data.begin() + 15)) << name;
  }
  // The gzip file really is compressed (starts with 1f 8b).
  std::string gz = testing::read_all(dir.file("a.idx.gz"));
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<uint8_t>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<uint8_t>(gz[1]), 0x8b);
}

TEST(Idx, LoadSplitScalesAndNormalises) {
  TempDir dir;
  std::vector<uint8_t> pixels, labels;
  write_split(dir, "train", ".gz", 5, &pixels, &labels);
  write_split(dir, "t10k", "", 3, &pixels, &labels);  // test split plain, pixels/labels now of t10k
  Dataset raw = load_idx_split(dir.path(), "test", "fashion-mnist", 0, /*normalize=*/false);
  ASSERT_EQ(raw.size(), 3);
  EXPECT_EQ(raw.sample_shape, (std::vector<int64_t>{1, 4, 3}));
  EXPECT_EQ(raw.num_classes, 10);
  for (size_t i = 0; i < pixels.size(); ++i) EXPECT_FLOAT_EQ(raw.features[i], pixels[i] / 255.0f);
  EXPECT_EQ(raw.labels, (std::vector<int32_t>{0, 3, 6}));
  Dataset norm = load_idx_split(dir.path(), "test", "fashion-mnist", 0, /*normalize=*/true);
  for (size_t i = 0; i < pixels.size(); ++i) {
    EXPECT_NEAR(norm.features[i], (pixels[i] / 255.0f - 0.2860f) / 0.3530f, 1e-6);
  }
  Dataset train = load_idx_split(dir.path(), "train", "mnist", 2, true);
  EXPECT_EQ(train.size(), 2);
  EXPECT_EQ(train.labels, (std::vector<int32_t>{0, 3}));
}

TEST(Idx, TruncatedPlainFileNamesFileAndOffset) {
  TempDir dir;
  std::string path = dir.file("t.idx");
  write_idx(path, {10, 4, 4}, pattern(160, 2));
  std::string bytes = testing::read_all(path);
  testing::write_all(path, bytes.substr(0, 100));
  std::string e = error_of([&] { read_idx(path, 3); });
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("truncated at byte 100"), std::string::npos) << e;
  EXPECT_NE(e.find("expected 160 bytes"), std::string::npos) << e;
  EXPECT_NE(e.find("starting at byte 16"), std::string::npos) << e;
  // A header cut short.
  testing::write_all(path, bytes.substr(0, 9));
  e = error_of([&] { read_idx(path, 3); });
  EXPECT_NE(e.find("truncated at byte 9"), std::string::npos) << e;
}

// Found by fuzz_idx: the reader allocated what the header announced before reading it.
TEST(Idx, HeaderAnnouncingATerabyteIsATruncationErrorNotAnAllocation) {
  TempDir dir;
  std::string path = dir.file("huge.idx");
  // 65536 x 4096 x 4096 = 2^40 bytes announced, 10 bytes present.
  const char header[] = {0, 0, 8, 3, 0, 1, 0, 0, 0, 0, 16, 0, 0, 0, 16, 0};
  testing::write_all(path, std::string(header, sizeof header) + std::string(10, '\x05'));
  std::string e = error_of([&] { read_idx(path, 3); });
  EXPECT_NE(e.find(path + ": truncated at byte 26"), std::string::npos) << e;
  EXPECT_NE(e.find("expected 1099511627776 bytes"), std::string::npos) << e;
  EXPECT_NE(e.find("starting at byte 16"), std::string::npos) << e;
}

TEST(Idx, TruncatedGzipNamesFileAndOffset) {
  TempDir dir;
  std::string path = dir.file("t.idx.gz");
  write_idx(path, {200, 28, 28}, pattern(200 * 784, 3));  // random bytes: ~157 kB compressed
  std::string bytes = testing::read_all(path);
  testing::write_all(path, bytes.substr(0, bytes.size() / 2));
  std::string e = error_of([&] { read_idx(path, 3); });
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("truncated at byte "), std::string::npos) << e;
  EXPECT_NE(e.find("expected 156800 bytes"), std::string::npos) << e;
}

TEST(Idx, CorruptGzipIsAnError) {
  TempDir dir;
  std::string path = dir.file("c.idx.gz");
  write_idx(path, {200, 28, 28}, std::vector<uint8_t>(200 * 784, 7));  // compresses well
  const std::string good = testing::read_all(path);
  std::string bytes = good;
  for (size_t i = 20; i < bytes.size() - 8; i += 3) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  testing::write_all(path, bytes);
  std::string e = error_of([&] { read_idx(path, 3); });
  EXPECT_NE(e.find(path + ": corrupt gzip stream near compressed byte "), std::string::npos) << e;

  bytes = good;
  bytes[bytes.size() - 6] = static_cast<char>(bytes[bytes.size() - 6] ^ 1);  // CRC32 in the gzip trailer
  testing::write_all(path, bytes);
  e = error_of([&] { read_idx(path, 3); });
  EXPECT_NE(e.find(path + ": corrupt gzip stream"), std::string::npos) << e;
  EXPECT_NE(e.find("incorrect data check"), std::string::npos) << e;

  testing::write_all(path, good.substr(0, good.size() - 4));  // all data, trailer cut
  e = error_of([&] { read_idx(path, 3); });
  EXPECT_NE(e.find(path + ": truncated gzip stream: all 156816 bytes"), std::string::npos) << e;
}

TEST(Idx, BadHeadersAreErrors) {
  TempDir dir;
  std::string path = dir.file("h.idx");
  testing::write_all(path, std::string("\x12\x34\x08\x03", 4) + std::string(12, '\0'));
  EXPECT_NE(error_of([&] { read_idx(path, 3); }).find("bad IDX magic at byte 0"), std::string::npos);
  testing::write_all(path, std::string("\0\0\x0D\x01\0\0\0\x01", 8) + "abcd");
  EXPECT_NE(error_of([&] { read_idx(path, 1); }).find("element type 0x0D at byte 2"), std::string::npos);
  write_idx(path, {4}, {1, 2, 3, 4});
  EXPECT_NE(error_of([&] { read_idx(path, 3); }).find("byte 3 says 1 dimensions, expected 3"), std::string::npos);
  testing::write_all(path, testing::read_all(path) + "xy");
  std::string e = error_of([&] { read_idx(path, 1); });
  EXPECT_NE(e.find("unexpected bytes after the IDX data at byte 12"), std::string::npos) << e;
}

TEST(Idx, BadLabelsAndCountMismatch) {
  TempDir dir;
  std::vector<uint8_t> pixels, labels;
  write_split(dir, "t10k", "", 3, &pixels, &labels);
  write_idx(dir.file("t10k-labels-idx1-ubyte"), {3}, {1, 12, 2});
  std::string e = error_of([&] { load_idx_split(dir.path(), "test", "mnist", 0, true); });
  EXPECT_NE(e.find("t10k-labels-idx1-ubyte: label 12 at byte 9"), std::string::npos) << e;
  write_idx(dir.file("t10k-labels-idx1-ubyte"), {2}, {1, 2});
  e = error_of([&] { load_idx_split(dir.path(), "test", "mnist", 0, true); });
  EXPECT_NE(e.find("holds 3 images but"), std::string::npos) << e;
  e = error_of([&] { load_idx_split(dir.path(), "train", "mnist", 0, true); });
  EXPECT_NE(e.find("train-images-idx3-ubyte.gz exists"), std::string::npos) << e;
}

TEST(Idx, RealFashionMnist) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!std::ifstream(dir + "/train-images-idx3-ubyte.gz").good()) GTEST_SKIP() << "Fashion-MNIST not in " << dir;
  Config cfg = Config::defaults();
  cfg.set("data.name=fashion-mnist");
  cfg.set("data.dir=" + dir);
  auto t0 = std::chrono::steady_clock::now();
  std::clock_t c0 = std::clock();
  DataSplits d = load_data(cfg);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  std::printf("[ timing ] load_data(fashion-mnist, 60000 + 10000 samples): %.3f s wall, %.3f s cpu\n", seconds, cpu);
  ASSERT_EQ(d.train.size(), 60000);
  ASSERT_EQ(d.test.size(), 10000);
  EXPECT_EQ(d.train.sample_shape, (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(d.train.num_classes, 10);
  std::vector<int> train_counts(10), test_counts(10);
  for (int32_t y : d.train.labels) train_counts[static_cast<size_t>(y)]++;
  for (int32_t y : d.test.labels) test_counts[static_cast<size_t>(y)]++;
  EXPECT_EQ(train_counts, std::vector<int>(10, 6000));
  EXPECT_EQ(test_counts, std::vector<int>(10, 1000));
  // Normalised with the published training statistics: mean ~0, std ~1.
  double sum = 0, sq = 0;
  for (float x : d.train.features) {
    sum += x;
    sq += static_cast<double>(x) * x;
  }
  double n = static_cast<double>(d.train.features.size());
  double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sq / n - mean * mean), 1.0, 0.01);
  // First training label of Fashion-MNIST is 9 (ankle boot), first test label is 9 too.
  EXPECT_EQ(d.train.labels[0], 9);
  EXPECT_EQ(d.test.labels[0], 9);

  cfg.set("data.train_size=1000");
  cfg.set("data.test_size=500");
  DataSplits small = load_data(cfg);
  EXPECT_EQ(small.train.size(), 1000);
  EXPECT_EQ(small.test.size(), 500);
  EXPECT_TRUE(std::equal(small.train.features.begin(), small.train.features.end(), d.train.features.begin()));
}

}  // namespace
}  // namespace pshard::data
