// A 2-worker sync job on a JPEG folder made from Fashion-MNIST's images learns; a damaged JPEG stops a job with its
// name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/support/run_helpers.h"

namespace {

using namespace pshard;
using pshard::testing::fresh_dir;
using pshard::testing::pshard_bin;
using pshard::testing::read_file;
using pshard::testing::read_summary;
using pshard::testing::run_with_timeout;
using pshard::testing::source_dir;

// Writes DIR: 4 classes x per_class 32x32 JPEGs; false when python3, PIL or the data set is missing.
bool make_folder(const std::string& dir, int per_class) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) return false;
  std::string cmd = "/usr/bin/python3 " + source_dir() + "/scripts/make_image_folder.py --out " + dir +
                    " --per-class " + std::to_string(per_class) + " --size 32 --classes 4 > " + dir + ".log 2>&1";
  return std::system(cmd.c_str()) == 0;
}

std::string job(const std::string& folder, const std::string& run_dir) {
  return pshard_bin() + " launch --servers 1 --workers 2 --timeout 240 --config " + source_dir() +
         "/configs/imagefolder_lenet_sync.toml --set data.dir=" + folder + " --run-dir " + run_dir;
}

TEST(ImageFolderJob, TwoWorkerSyncJobLearns) {
  const std::string dir = fresh_dir("imagefolder-job");
  if (!make_folder(dir + "/folder", 200)) GTEST_SKIP() << "needs /usr/bin/python3 with PIL and dataset-fashion-mnist";
  std::ofstream(dir + "/folder/dress/notes.jpg") << "not an image";
  int rc = run_with_timeout(job(dir + "/folder", dir + "/run"), 300, dir + "/log");
  std::string log = read_file(dir + "/log");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("image-folder: skipped " + dir + "/folder/dress/notes.jpg: not a JPEG or PNG image"),
            std::string::npos)
      << log;
  Json summary = read_summary(dir + "/run");
  double acc = summary.at("test_acc").as_number();
  std::printf("2-worker image-folder job: test accuracy %.4f after 2 epochs (chance 0.25)\n", acc);
  EXPECT_GE(acc, 0.5);
  EXPECT_EQ(summary.at("epochs").as_int(), 2);
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(ImageFolderJob, TruncatedJpegStopsTheJobNamingIt) {
  const std::string dir = fresh_dir("imagefolder-bad");
  if (!make_folder(dir + "/folder", 20)) GTEST_SKIP() << "needs /usr/bin/python3 with PIL and dataset-fashion-mnist";
  const std::string victim = dir + "/folder/dress/0003.jpg";
  std::filesystem::resize_file(victim, std::filesystem::file_size(victim) / 2);
  // Nearly every image trains (1 of 20 per class is held out), so the damaged one is decoded in epoch 1 or in the test.
  int rc = run_with_timeout(job(dir + "/folder", dir + "/run") + " --set data.test_fraction=0.05", 300, dir + "/log");
  std::string log = read_file(dir + "/log");
  EXPECT_NE(rc, 0) << log;
  EXPECT_NE(log.find(victim + ": corrupt or truncated JPEG"), std::string::npos) << log;
  pshard::testing::remove_dir_if_passed(dir);
}

}  // namespace
