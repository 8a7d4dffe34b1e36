// Packed encoded-image files (version 2): round trip, the same samples as the folder, `pshard data pack`, damage.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "common/config/config.h"
#include "tests/worker/data/temp_dir.h"
#include "worker/data/image_folder.h"
#include "worker/data/packed.h"

namespace pshard::data {
namespace {

using testing::error_of;
using testing::read_all;
using testing::TempDir;
using testing::write_all;

std::string jpeg_bytes(int seed) {
  RgbImage image;
  image.width = 20 + seed % 5;
  image.height = 18;
  for (int i = 0; i < image.width * image.height * 3; ++i) image.pixels.push_back(static_cast<uint8_t>(i * seed));
  std::vector<uint8_t> j = encode_jpeg(image, 90);
  return std::string(j.begin(), j.end());
}

std::vector<std::string> write_images(const TempDir& t, int n) {
  std::vector<std::string> paths;
  for (int i = 0; i < n; ++i) {
    paths.push_back(t.file("img" + std::to_string(i) + ".jpg"));
    write_all(paths.back(), jpeg_bytes(i + 3));
  }
  return paths;
}

TEST(PackedImages, RoundTripKeepsBytesLabelsAndOrder) {
  TempDir t;
  std::vector<std::string> paths = write_images(t, 6);
  std::vector<int32_t> labels = {0, 1, 2, 0, 1, 2};
  std::vector<int64_t> order = {4, 0, 5, 2, 1, 3};
  write_packed_images(t.file("p.pshd"), ImageFiles(paths), labels, 3, order);
  PackedInfo info = read_packed_info(t.file("p.pshd"));
  EXPECT_TRUE(info.encoded_images);
  EXPECT_EQ(info.count, 6);
  EXPECT_EQ(info.num_classes, 3);
  PackedImages packed(t.file("p.pshd"));
  ASSERT_EQ(packed.size(), 6);
  for (int64_t k = 0; k < 6; ++k) {
    std::vector<uint8_t> b = packed.bytes(k);
    EXPECT_EQ(std::string(b.begin(), b.end()), read_all(paths[static_cast<size_t>(order[k])])) << k;
    EXPECT_EQ(packed.labels()[static_cast<size_t>(k)], labels[static_cast<size_t>(order[k])]);
  }
  // The same decode and transforms: record k is the sample of file order[k] (under the evaluation
  // transform: augmentation draws follow the sample index, which packing shuffles).
  ImageTransform tr;
  tr.image_size = 12;
  tr.augment = false;
  ImageSource eval_pack(std::make_shared<PackedImages>(t.file("p.pshd")), tr), eval_files(paths, tr);
  std::vector<float> a(3 * 12 * 12), b(3 * 12 * 12);
  eval_pack.make_sample(2, 0, a.data());
  eval_files.make_sample(5, 0, b.data());
  EXPECT_EQ(a, b);
  // Float readers refuse the file with a pointer to what it is.
  EXPECT_NE(error_of([&] { read_packed(t.file("p.pshd")); }).find("holds encoded images"), std::string::npos);
}

TEST(PackedImages, DamagedRecordIsNamed) {
  TempDir t;
  std::vector<std::string> paths = write_images(t, 3);
  write_packed_images(t.file("p.pshd"), ImageFiles(paths), {0, 1, 0}, 2, {0, 1, 2});
  std::string bytes = read_all(t.file("p.pshd"));
  size_t header = 192;  // 128 + 8 (shape) + 12 (name), padded to 64
  size_t first = read_all(paths[0]).size();
  bytes[header + first + 10] ^= 0x40;  // inside record 1
  write_all(t.file("p.pshd"), bytes);
  PackedImages packed(t.file("p.pshd"));
  EXPECT_NO_THROW(packed.bytes(0));
  std::string e = error_of([&] { packed.bytes(1); });
  EXPECT_NE(e.find(t.file("p.pshd") + " record 1: checksum mismatch over bytes ["), std::string::npos) << e;
}

TEST(PackedImages, TruncatedFileIsRefused) {
  TempDir t;
  std::vector<std::string> paths = write_images(t, 3);
  write_packed_images(t.file("p.pshd"), ImageFiles(paths), {0, 1, 0}, 2, {0, 1, 2});
  std::filesystem::resize_file(t.file("p.pshd"), 300);
  std::string e = error_of([&] { PackedImages p(t.file("p.pshd")); });
  EXPECT_NE(e.find(t.file("p.pshd") + ": truncated at byte 300"), std::string::npos) << e;
}

TEST(PackedImages, PackCommandSkipsBadImagesAndLoadsAsPacked) {
  const char* bin = std::getenv("PSHARD_BIN");
  if (bin == nullptr) GTEST_SKIP() << "PSHARD_BIN not set (run through ctest)";
  TempDir t;
  for (const char* c : {"a", "b"}) {
    std::filesystem::create_directories(t.file(std::string("f/") + c));
    for (int i = 0; i < 10; ++i)
      write_all(t.file(std::string("f/") + c + "/" + std::to_string(i) + ".jpg"), jpeg_bytes(i + 7));
  }
  std::string cut = jpeg_bytes(1);
  write_all(t.file("f/b/cut.jpg"), cut.substr(0, cut.size() / 2));
  std::string cmd = std::string(bin) + " data pack --dir " + t.file("f") + " --out " + t.file("p") +
                    " --test-fraction 0.2 > " + t.file("out.txt") + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_all(t.file("out.txt"));
  std::string out = read_all(t.file("out.txt"));
  EXPECT_NE(out.find("pshard data pack: skipped " + t.file("f/b/cut.jpg") + ": corrupt or truncated JPEG"),
            std::string::npos)
      << out;
  EXPECT_EQ(read_all(t.file("p-classes.txt")), "a\nb\n");
  Config cfg = Config::defaults();
  cfg.set("data.name=packed");
  cfg.set("data.train_path=" + t.file("p-train.pshd"));
  cfg.set("data.test_path=" + t.file("p-test.pshd"));
  cfg.set("data.image_size=16");
  DataSplits s = load_data(cfg);
  EXPECT_EQ(s.train.size() + s.test.size(), 20);  // 21 files, the truncated one left out
  EXPECT_EQ(s.test.size(), 4);
  EXPECT_EQ(s.train.sample_shape, (std::vector<int64_t>{3, 16, 16}));
  std::set<int32_t> classes(s.train.labels.begin(), s.train.labels.end());
  EXPECT_EQ(classes, (std::set<int32_t>{0, 1}));
}

TEST(PackedImages, PackCommandRefusesAMissingFolder) {
  const char* bin = std::getenv("PSHARD_BIN");
  if (bin == nullptr) GTEST_SKIP() << "PSHARD_BIN not set (run through ctest)";
  TempDir t;
  std::string cmd = std::string(bin) + " data pack --dir " + t.file("nope") + " --out " + t.file("p") + " > " +
                    t.file("out.txt") + " 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_NE(read_all(t.file("out.txt")).find("image folder " + t.file("nope") + ": not a directory"), std::string::npos)
      << read_all(t.file("out.txt"));
  EXPECT_FALSE(std::filesystem::exists(t.file("p-train.pshd")));
}

TEST(PackedImages, ConvertRefusesDecodedDataSets) {
  TempDir t;
  std::vector<std::string> paths = write_images(t, 2);
  Dataset d;
  d.name = "image-folder";
  d.sample_shape = {3, 8, 8};
  d.num_classes = 2;
  d.labels = {0, 1};
  d.source = std::make_shared<ImageSource>(paths, ImageTransform{});
  EXPECT_NE(error_of([&] { write_packed(t.file("x.pshd"), d); }).find("pack an image folder with `pshard data pack`"),
            std::string::npos);
}

}  // namespace
}  // namespace pshard::data
