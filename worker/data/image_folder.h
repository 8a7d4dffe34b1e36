// Image folders (one sub-folder per class of JPEG/PNG files): scanning, the train/test split and the decoding data set.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "worker/data/dataset.h"
#include "worker/data/image_source.h"

namespace pshard::data {

// One image of a folder and its class (the index of its sub-folder in sorted order).
struct ImageFile {
  std::string path;
  int32_t label = 0;
};

struct ImageFolderScan {
  std::vector<std::string> classes;  // sub-folder names, sorted bytewise
  std::vector<ImageFile> files;      // by class, then by file name
  std::vector<std::string> skipped;  // "PATH: why" for each file left out
};

// Scans DIR/CLASS/FILE. Files ending in .jpg, .jpeg or .png (any case) are
// images; other files are ignored. An image of 0 bytes, or whose first bytes
// are not a JPEG or PNG signature, is skipped and named in `skipped`.
// Refused with an Error naming the path: DIR missing, unreadable or without
// sub-folders; a class folder that cannot be read; a class folder with no
// usable image (its class would never be seen).
ImageFolderScan scan_image_folder(const std::string& dir);

// The deterministic split of one folder: in each class, the files are
// shuffled with `seed` and the first round(n * test_fraction) (at least 1
// when test_fraction > 0 and the class has 2 or more) go to the test split.
// It depends only on the file list and the seed, so every worker gets the
// same split.
void split_train_test(const std::vector<ImageFile>& files, double test_fraction, uint64_t seed,
                      std::vector<ImageFile>* train, std::vector<ImageFile>* test);

// Per-channel mean and std (pixels scaled to [0, 1]) over up to
// `max_images` images spread evenly over `images`, decoded whole.
ChannelStats compute_channel_stats(const EncodedImages& images, int max_images);

// The classes and the train/test files of data.dir, as load_image_folder and
// `pshard data pack` see them (skipped files are reported on stderr).
struct ImageFolderSplits {
  std::vector<std::string> classes;
  std::vector<ImageFile> train, test;
};
ImageFolderSplits split_image_folder(const Config& cfg);

// data.name = image-folder: the splits of data.dir as decoding data sets.
// DIR/train and DIR/test (or DIR/val) when both exist, otherwise DIR split
// with data.test_fraction and run.seed. Skipped files are reported on stderr.
DataSplits load_image_folder(const Config& cfg);

// data.name = packed with files written by `pshard data pack` (version 2):
// their records through the same decode and transforms as load_image_folder.
DataSplits load_packed_images(const Config& cfg);

}  // namespace pshard::data
