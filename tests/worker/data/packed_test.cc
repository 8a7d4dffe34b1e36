// Packed record files: round trips, `pshard data convert`, and errors naming the file and byte offset.
#include "worker/data/packed.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <cstring>

#include "common/config/config.h"
#include "tests/worker/data/temp_dir.h"
#include "worker/data/idx.h"
#include "worker/data/synthetic.h"

namespace pshard::data {
namespace {

using testing::error_of;
using testing::TempDir;

Dataset small_images() {
  DataSplits s = make_synthetic_images(37, 5, {3, 5, 4}, 6, 11);
  return s.train;
}

TEST(Packed, RoundTripClassification) {
  TempDir dir;
  Dataset d = small_images();
  std::string path = dir.file("img.pshd");
  write_packed(path, d);
  Dataset back = read_packed(path);
  EXPECT_EQ(back.name, "synthetic-images");
  EXPECT_EQ(back.sample_shape, d.sample_shape);
  EXPECT_EQ(back.num_classes, 6);
  EXPECT_EQ(back.target_dim, 0);
  EXPECT_EQ(back.features, d.features);
  EXPECT_EQ(back.labels, d.labels);
  EXPECT_TRUE(back.targets.empty());
  Dataset first = read_packed(path, 10);
  EXPECT_EQ(first.size(), 10);
  EXPECT_EQ(first.labels, std::vector<int32_t>(d.labels.begin(), d.labels.begin() + 10));
  PackedInfo info = read_packed_info(path);
  EXPECT_EQ(info.count, 37);
  EXPECT_EQ(info.file_bytes % 64, 0u);
  EXPECT_EQ(info.file_bytes, testing::read_all(path).size());
}

TEST(Packed, RoundTripRegression) {
  TempDir dir;
  Dataset d = make_synthetic_regression(50, 3, 7, 0.5, 3).train;
  std::string path = dir.file("reg.pshd");
  write_packed(path, d);
  Dataset back = read_packed(path);
  EXPECT_EQ(back.sample_shape, (std::vector<int64_t>{7}));
  EXPECT_EQ(back.num_classes, 0);
  EXPECT_EQ(back.target_dim, 1);
  EXPECT_EQ(back.features, d.features);
  EXPECT_EQ(back.targets, d.targets);
  EXPECT_TRUE(back.labels.empty());
}

TEST(Packed, CorruptAndTruncatedFiles) {
  TempDir dir;
  std::string path = dir.file("x.pshd");
  write_packed(path, small_images());
  const std::string good = testing::read_all(path);
  uint64_t features_offset;
  std::memcpy(&features_offset, good.data() + 48, 8);

  std::string bad = good;
  bad[0] = 'X';
  testing::write_all(path, bad);
  EXPECT_NE(error_of([&] { read_packed(path); }).find(path + ": byte 0: bad magic"), std::string::npos);

  bad = good;
  bad[8] = 9;  // version
  testing::write_all(path, bad);
  EXPECT_NE(error_of([&] { read_packed(path); }).find("byte 8: unsupported packed format version 9"),
            std::string::npos);

  bad = good;
  bad[16] = static_cast<char>(bad[16] + 1);  // count, header checksum no longer matches
  testing::write_all(path, bad);
  EXPECT_NE(error_of([&] { read_packed(path); }).find("header checksum mismatch"), std::string::npos);

  bad = good;
  bad[features_offset + 100] = static_cast<char>(bad[features_offset + 100] ^ 1);
  testing::write_all(path, bad);
  std::string e = error_of([&] { read_packed(path); });
  EXPECT_NE(e.find(path + ": checksum mismatch in the features section at bytes [" + std::to_string(features_offset)),
            std::string::npos)
      << e;

  testing::write_all(path, good.substr(0, good.size() - 300));
  e = error_of([&] { read_packed(path); });
  EXPECT_NE(e.find(path + ": truncated at byte " + std::to_string(good.size() - 300)), std::string::npos) << e;

  testing::write_all(path, good.substr(0, 60));
  e = error_of([&] { read_packed(path); });
  EXPECT_NE(e.find("truncated at byte 60: expected 128 bytes of packed header"), std::string::npos) << e;

  testing::write_all(path, good + "zz");
  e = error_of([&] { read_packed(path); });
  EXPECT_NE(e.find("unexpected bytes after byte " + std::to_string(good.size())), std::string::npos) << e;
}

// A header whose section sizes wrap around 2^64: 2^31 samples of 2^32 x 2 floats are 2^66 bytes,
// i.e. 0 modulo 2^64, so a 192-byte file matched its own layout and read_packed returned a data
// set of "2^31 samples" without features (and computed 2^31 * 2^33 in int64: undefined behaviour).
TEST(Packed, SectionSizesThatWrapAroundAreAnError) {
  TempDir dir;
  std::string path = dir.file("wrap.pshd");
  Dataset d;
  d.name = "x";
  d.sample_shape = {1, 2};
  d.features = {1, 2};
  write_packed(path, d);
  std::string bytes = testing::read_all(path);
  ASSERT_EQ(bytes.size(), 256u);  // 192 bytes of header, one 64-byte features section
  auto put64 = [&](size_t off, uint64_t v) { std::memcpy(&bytes[off], &v, 8); };
  auto put32 = [&](size_t off, uint32_t v) { std::memcpy(&bytes[off], &v, 4); };
  bytes.resize(192);
  put64(16, uint64_t(1) << 31);   // count
  put64(128, uint64_t(1) << 32);  // sample shape {2^32, 2}
  put64(48, 192);                 // features_offset
  put64(72, 192);                 // file_bytes: the wrapped layout ends with the header
  put32(80, 0);                   // crc32 of the (empty) features section
  put32(92, 0);
  put32(92, static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), 192)));
  testing::write_all(path, bytes);
  std::string e = error_of([&] { read_packed(path); });
  EXPECT_NE(e.find(path + ": byte 16: sample count 2147483648 times 8589934592 values per sample"), std::string::npos)
      << e;
  EXPECT_NE(error_of([&] { read_packed_info(path); }).find("exceeds 2^40 values"), std::string::npos);
}

TEST(Packed, LoadDataReadsPackedSplits) {
  TempDir dir;
  DataSplits s = make_synthetic_images(20, 8, {1, 4, 4}, 3, 5);
  write_packed(dir.file("p-train.pshd"), s.train);
  write_packed(dir.file("p-test.pshd"), s.test);
  Config cfg = Config::defaults();
  cfg.set("data.name=packed");
  cfg.set("data.train_path=" + dir.file("p-train.pshd"));
  cfg.set("data.test_path=" + dir.file("p-test.pshd"));
  cfg.set("data.test_size=5");
  DataSplits back = load_data(cfg);
  EXPECT_EQ(back.train.features, s.train.features);
  EXPECT_EQ(back.test.size(), 5);
  cfg.set("data.train_path=");
  EXPECT_NE(error_of([&] { load_data(cfg); }).find("needs data.train_path"), std::string::npos);
}

// `pshard data convert` on a small IDX data set: the packed files hold exactly what load_data reads.
TEST(Packed, ConvertCommandRoundTrip) {
  const char* bin = std::getenv("PSHARD_BIN");
  if (bin == nullptr) GTEST_SKIP() << "PSHARD_BIN not set (run through ctest)";
  TempDir dir;
  std::vector<uint8_t> pixels(9 * 7 * 6), labels(9);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 37 % 251);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<uint8_t>(9 - i);
  write_idx(dir.file("train-images-idx3-ubyte.gz"), {9, 7, 6}, pixels);
  write_idx(dir.file("train-labels-idx1-ubyte.gz"), {9}, labels);
  write_idx(dir.file("t10k-images-idx3-ubyte"), {9, 7, 6}, pixels);
  write_idx(dir.file("t10k-labels-idx1-ubyte"), {9}, labels);
  std::string cmd = std::string(bin) + " data convert --data mnist --dir " + dir.path() + " --out " + dir.file("m") +
                    " --set data.test_size=4 > " + dir.file("out.txt") + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << testing::read_all(dir.file("out.txt"));
  EXPECT_NE(testing::read_all(dir.file("out.txt")).find("9 samples of [1,7,6]"), std::string::npos)
      << testing::read_all(dir.file("out.txt"));

  Config cfg = Config::defaults();
  cfg.set("data.name=mnist");
  cfg.set("data.dir=" + dir.path());
  cfg.set("data.test_size=4");
  DataSplits direct = load_data(cfg);
  Dataset train = read_packed(dir.file("m-train.pshd"));
  Dataset test = read_packed(dir.file("m-test.pshd"));
  EXPECT_EQ(train.name, "mnist");
  EXPECT_EQ(train.sample_shape, direct.train.sample_shape);
  EXPECT_EQ(train.features, direct.train.features);
  EXPECT_EQ(train.labels, direct.train.labels);
  EXPECT_EQ(test.size(), 4);
  EXPECT_EQ(test.features, direct.test.features);
  EXPECT_EQ(test.labels, direct.test.labels);

  std::string bad = std::string(bin) + " data convert --data mnist --dir " + dir.path() + "/missing --out " +
                    dir.file("n") + " > " + dir.file("err.txt") + " 2>&1";
  EXPECT_NE(std::system(bad.c_str()), 0);
  EXPECT_NE(testing::read_all(dir.file("err.txt")).find("train-images-idx3-ubyte"), std::string::npos);
}

}  // namespace
}  // namespace pshard::data
