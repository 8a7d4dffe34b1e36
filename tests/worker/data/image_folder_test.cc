// Image folders: what is skipped and what is refused, the seeded split, deterministic samples, shard coverage.
#include "worker/data/image_folder.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>

#include "common/error.h"
#include "tests/worker/data/temp_dir.h"
#include "worker/data/batch_loader.h"
#include "worker/data/image_source.h"
#include "worker/data/sampler.h"

namespace pshard::data {
namespace {

using testing::TempDir;
using testing::write_all;

std::string jpeg_bytes(int seed, int size = 24) {
  RgbImage image;
  image.width = image.height = size;
  for (int i = 0; i < size * size * 3; ++i) image.pixels.push_back(static_cast<uint8_t>(i * seed + seed * 31));
  std::vector<uint8_t> j = encode_jpeg(image, 90);
  return std::string(j.begin(), j.end());
}

// DIR/CLASS/NNN.jpg for each class, `per_class` images each.
void make_folder(const std::string& dir, const std::vector<std::string>& classes, int per_class) {
  int seed = 1;
  for (const std::string& c : classes) {
    std::filesystem::create_directories(dir + "/" + c);
    for (int i = 0; i < per_class; ++i)
      write_all(dir + "/" + c + "/" + std::to_string(100 + i) + ".jpg", jpeg_bytes(seed++));
  }
}

std::string scan_error(const std::string& dir) {
  try {
    scan_image_folder(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ImageFolder, ScansClassesInSortedOrder) {
  TempDir t;
  make_folder(t.path(), {"zebra", "ant", "moth"}, 3);
  write_all(t.file("ant/README.txt"), "not an image, ignored");
  ImageFolderScan s = scan_image_folder(t.path());
  EXPECT_EQ(s.classes, (std::vector<std::string>{"ant", "moth", "zebra"}));
  ASSERT_EQ(s.files.size(), 9u);
  EXPECT_EQ(s.files[0].path, t.file("ant/100.jpg"));
  EXPECT_EQ(s.files[0].label, 0);
  EXPECT_EQ(s.files[8].path, t.file("zebra/102.jpg"));
  EXPECT_EQ(s.files[8].label, 2);
  EXPECT_TRUE(s.skipped.empty());
}

TEST(ImageFolder, TextFileNamedJpgIsSkippedAndNamed) {
  TempDir t;
  make_folder(t.path(), {"a", "b"}, 2);
  write_all(t.file("a/notes.jpg"), "hello, I am text\n");
  ImageFolderScan s = scan_image_folder(t.path());
  EXPECT_EQ(s.files.size(), 4u);
  ASSERT_EQ(s.skipped.size(), 1u);
  EXPECT_EQ(s.skipped[0], t.file("a/notes.jpg") +
                              ": not a JPEG or PNG image (the first bytes are neither FF D8 FF nor the PNG signature)");
}

TEST(ImageFolder, EmptyFileIsSkippedAndNamed) {
  TempDir t;
  make_folder(t.path(), {"a", "b"}, 2);
  write_all(t.file("b/zero.png"), "");
  ImageFolderScan s = scan_image_folder(t.path());
  EXPECT_EQ(s.files.size(), 4u);
  ASSERT_EQ(s.skipped.size(), 1u);
  EXPECT_EQ(s.skipped[0], t.file("b/zero.png") + ": empty file (0 bytes)");
}

// Opening a FIFO waits for a writer: the scan must see what the file is without opening it blocking, and skip it by
// name (also a device, and an image that became a FIFO after the scan, when its batch is made).
TEST(ImageFolder, FifoNamedLikeAnImageIsSkippedWithoutWaiting) {
  TempDir t;
  make_folder(t.path(), {"a", "b"}, 2);
  ASSERT_EQ(::mkfifo(t.file("a/x.jpg").c_str(), 0600), 0);
  ASSERT_EQ(::symlink("/dev/zero", t.file("b/zero.jpg").c_str()), 0);
  const auto t0 = std::chrono::steady_clock::now();
  ImageFolderScan s = scan_image_folder(t.path());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(s.files.size(), 4u);
  ASSERT_EQ(s.skipped.size(), 2u);
  EXPECT_EQ(s.skipped[0], t.file("a/x.jpg") + ": not a regular file (a FIFO): refusing to read it");
  EXPECT_EQ(s.skipped[1], t.file("b/zero.jpg") + ": not a regular file (a character device): refusing to read it");
  std::filesystem::remove(t.file("a/100.jpg"));
  ASSERT_EQ(::mkfifo(t.file("a/100.jpg").c_str(), 0600), 0);
  try {
    read_file_bytes(t.file("a/100.jpg"));
    FAIL() << "read a FIFO as an image";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("image " + t.file("a/100.jpg") + ": not a regular file (a FIFO)"),
              std::string::npos)
        << e.what();
  }
}

TEST(ImageFolder, ClassFolderWithoutImagesIsRefused) {
  TempDir t;
  make_folder(t.path(), {"a", "b"}, 2);
  std::filesystem::create_directories(t.file("c"));
  write_all(t.file("c/bad.jpg"), "");
  EXPECT_EQ(scan_error(t.path()), "class folder " + t.file("c") +
                                      ": no usable .jpg, .jpeg or .png image (class 'c' would never be seen; remove "
                                      "the folder or add images)");
}

TEST(ImageFolder, MissingFolderAndFolderWithoutClassesAreRefused) {
  TempDir t;
  EXPECT_NE(scan_error(t.file("nope")).find("image folder " + t.file("nope") + ": not a directory"), std::string::npos);
  write_all(t.file("loose.jpg"), jpeg_bytes(3));
  EXPECT_EQ(scan_error(t.path()), "image folder " + t.path() + ": no class sub-folders (DIR/CLASS/IMAGE.jpg)");
}

TEST(ImageFolder, UnreadableClassFolderIsRefused) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads folders of mode 000";
  TempDir t;
  make_folder(t.path(), {"a", "b"}, 2);
  ::chmod(t.file("b").c_str(), 0);
  std::string e = scan_error(t.path());
  ::chmod(t.file("b").c_str(), 0755);
  EXPECT_EQ(e, "class folder " + t.file("b") + ": cannot read: Permission denied");
}

TEST(ImageFolder, TruncatedJpegIsAnErrorNamingItWhenItsBatchIsMade) {
  TempDir t;
  make_folder(t.path(), {"a", "b"}, 2);
  std::string j = jpeg_bytes(5);
  write_all(t.file("b/cut.jpg"), j.substr(0, j.size() / 2));
  ImageFolderScan s = scan_image_folder(t.path());  // the header is fine: not skipped at scan
  ASSERT_EQ(s.files.size(), 5u);
  std::vector<std::string> paths;
  for (const ImageFile& f : s.files) paths.push_back(f.path);
  ImageTransform tr;
  tr.image_size = 16;
  tr.threads = 2;
  ImageSource source(paths, tr);
  std::vector<int64_t> all = {0, 1, 2, 3, 4};
  std::vector<float> out(5 * 3 * 16 * 16);
  try {
    source.fill(all.data(), 5, 0, out.data());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(t.file("b/cut.jpg") + ": corrupt or truncated JPEG"), std::string::npos)
        << e.what();
  }
}

TEST(ImageFolder, SplitIsSeededStratifiedAndDisjoint) {
  std::vector<ImageFile> files;
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 20; ++i) files.push_back({"c" + std::to_string(c) + "/" + std::to_string(i), c});
  std::vector<ImageFile> train, test, train2, test2, train3, test3;
  split_train_test(files, 0.25, 9, &train, &test);
  split_train_test(files, 0.25, 9, &train2, &test2);
  split_train_test(files, 0.25, 10, &train3, &test3);
  EXPECT_EQ(test.size(), 15u);  // 5 of each class
  EXPECT_EQ(train.size(), 45u);
  std::set<std::string> seen;
  for (const auto& f : train) seen.insert(f.path);
  for (const auto& f : test) EXPECT_TRUE(seen.insert(f.path).second) << f.path << " in both splits";
  EXPECT_EQ(seen.size(), files.size());
  for (int c = 0; c < 3; ++c)
    EXPECT_EQ(std::count_if(test.begin(), test.end(), [c](const ImageFile& f) { return f.label == c; }), 5);
  auto paths = [](const std::vector<ImageFile>& v) {
    std::vector<std::string> p;
    for (const auto& f : v) p.push_back(f.path);
    return p;
  };
  EXPECT_EQ(paths(test), paths(test2));  // what every worker computes
  EXPECT_NE(paths(test), paths(test3));
}

class FolderData : public ::testing::Test {
 protected:
  void SetUp() override {
    make_folder(t_.path(), {"a", "b", "c"}, 8);
    ImageFolderScan s = scan_image_folder(t_.path());
    for (const ImageFile& f : s.files) paths_.push_back(f.path);
  }
  ImageTransform transform(int threads) const {
    ImageTransform tr;
    tr.image_size = 16;
    tr.seed = 5;
    tr.threads = threads;
    return tr;
  }
  TempDir t_;
  std::vector<std::string> paths_;
};

TEST_F(FolderData, SamplesDependOnlyOnSeedEpochAndIndex) {
  ImageSource one(paths_, transform(1)), three(paths_, transform(3));
  std::vector<int64_t> idx = {4, 17, 0, 9, 23, 4};
  const size_t elems = 3 * 16 * 16;
  std::vector<float> a(idx.size() * elems), b(idx.size() * elems), c(idx.size() * elems);
  one.fill(idx.data(), 6, 2, a.data());
  three.fill(idx.data(), 6, 2, b.data());
  EXPECT_EQ(a, b);  // bit-identical whatever the thread count
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + elems, a.begin() + 5 * elems));  // index 4 twice
  three.fill(idx.data(), 6, 3, c.data());
  EXPECT_NE(a, c);  // another epoch draws other crops
  ImageTransform eval = transform(2);
  eval.augment = false;
  ImageSource test_source(paths_, eval);
  std::vector<float> e1(elems), e2(elems);
  test_source.make_sample(7, 0, e1.data());
  test_source.make_sample(7, 4, e2.data());
  EXPECT_EQ(e1, e2);  // the evaluation transform draws nothing
}

TEST_F(FolderData, ShardsCoverEachImageOncePerEpoch) {
  Dataset d;
  d.name = "image-folder";
  d.sample_shape = {3, 16, 16};
  d.num_classes = 3;
  for (size_t i = 0; i < paths_.size(); ++i) d.labels.push_back(static_cast<int32_t>(i / 8));
  d.source = std::make_shared<ImageSource>(paths_, transform(2));
  d.check_consistent("test");
  ASSERT_EQ(d.size(), 24);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::multiset<int32_t> labels_seen;
    std::multiset<int64_t> taken;
    for (int rank = 0; rank < 2; ++rank) {
      ShardSampler sampler(24, rank, 2, 3);
      for (int64_t i : sampler.epoch_indices(epoch, 4)) taken.insert(i);
      BatchLoader loader(d, sampler, 4, 2);
      loader.start_epoch(epoch);
      Batch b;
      int64_t batches = 0;
      while (loader.next(&b)) {
        ++batches;
        ASSERT_EQ(b.x.size(), 4u * 3 * 16 * 16);
        for (int32_t y : b.labels) labels_seen.insert(y);
      }
      EXPECT_EQ(batches, 3);
    }
    ASSERT_EQ(taken.size(), 24u);
    for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(taken.count(i), 1u) << "epoch " << epoch << " image " << i;
    for (int32_t c = 0; c < 3; ++c) EXPECT_EQ(labels_seen.count(c), 8u);
  }
  std::multiset<int64_t> eval;
  for (int rank = 0; rank < 2; ++rank)
    for (int64_t i : eval_shard(24, rank, 2)) eval.insert(i);
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(eval.count(i), 1u);
}

Config folder_config(const std::string& dir, const std::vector<std::string>& extra = {}) {
  Config cfg = Config::defaults();
  cfg.set("data.name=image-folder");
  cfg.set("data.dir=" + dir);
  cfg.set("data.image_size=16");
  for (const std::string& s : extra) cfg.set(s);
  return cfg;
}

TEST(ImageFolderLoad, SplitsOneFolderOrUsesTrainAndTest) {
  TempDir t;
  make_folder(t.file("one"), {"a", "b"}, 10);
  DataSplits s = load_data(folder_config(t.file("one"), {"data.test_fraction=0.2"}));
  EXPECT_EQ(s.train.size(), 16);
  EXPECT_EQ(s.test.size(), 4);
  EXPECT_EQ(s.train.sample_shape, (std::vector<int64_t>{3, 16, 16}));
  EXPECT_EQ(s.train.num_classes, 2);
  make_folder(t.file("two/train"), {"a", "b"}, 6);
  make_folder(t.file("two/val"), {"a", "b"}, 3);
  s = load_data(folder_config(t.file("two"), {"data.mean=0.5,0.5,0.5", "data.std=0.25, 0.25, 0.25"}));
  EXPECT_EQ(s.train.size(), 12);
  EXPECT_EQ(s.test.size(), 6);
  // A size limit keeps every class's share, not the first class's images.
  s = load_data(folder_config(t.file("two"), {"data.train_size=4", "data.mean=0,0,0", "data.std=1,1,1"}));
  EXPECT_EQ(s.train.labels, (std::vector<int32_t>{0, 0, 1, 1}));
}

std::string load_error(const Config& cfg) {
  try {
    load_data(cfg);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ImageFolderLoad, RefusesMismatchedClassesAndBadStatistics) {
  TempDir t;
  make_folder(t.file("train"), {"a", "b"}, 2);
  make_folder(t.file("test"), {"a", "c"}, 2);
  EXPECT_NE(load_error(folder_config(t.path())).find("both need the same class sub-folders"), std::string::npos);
  make_folder(t.file("one"), {"a", "b"}, 4);
  EXPECT_NE(load_error(folder_config(t.file("one"), {"data.mean=0.5,0.5"})).find("give both data.mean and data.std"),
            std::string::npos);
  EXPECT_NE(load_error(folder_config(t.file("one"), {"data.mean=0.5,x,0.5", "data.std=1,1,1"}))
                .find("data.mean = \"0.5,x,0.5\": 'x' is not a number"),
            std::string::npos);
  EXPECT_NE(load_error(folder_config(t.file("one"), {"data.mean=0.5,0.5", "data.std=1,1"})).find("need 3 values"),
            std::string::npos);
}

}  // namespace
}  // namespace pshard::data
