// Image folders: the scan with its skip/refuse rules, the seeded split, decoding sources and load_image_folder().
#include "worker/data/image_folder.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/util/binary_file.h"
#include "worker/data/packed.h"
#include "worker/data/random.h"

namespace pshard::data {

namespace {

bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Entry names of a folder, sorted bytewise; an Error naming it when it cannot be listed.
std::vector<std::string> list_dir(const std::string& dir, const char* what) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw Error(std::string(what) + " " + dir + ": cannot read: " + std::strerror(errno));
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool has_image_extension(const std::string& name) {
  size_t dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = name.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == "jpg" || ext == "jpeg" || ext == "png";
}

// Empty when the file looks like an image; otherwise why it is skipped. Opening never blocks: a FIFO or device
// named like an image is skipped as "not a regular file (a FIFO)", not waited on.
std::string skip_reason(const std::string& path) {
  std::string bytes;
  try {
    bytes = binary::read_file_prefix(path, "image", 8);
  } catch (const Error& e) {  // "image PATH: <why>"
    const std::string what = e.what(), prefix = "image " + path + ": ";
    return what.compare(0, prefix.size(), prefix) == 0 ? what.substr(prefix.size()) : what;
  }
  uint8_t head[8] = {};
  const size_t got = std::min(bytes.size(), sizeof head);
  std::memcpy(head, bytes.data(), got);
  if (got == 0) return "empty file (0 bytes)";
  if (sniff_image_format(head, got) == ImageFormat::kUnknown) {
    return "not a JPEG or PNG image (the first bytes are neither FF D8 FF nor the PNG signature)";
  }
  return "";
}

std::vector<float> parse_floats(const std::string& text, const std::string& key) {
  std::vector<float> v;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      v.push_back(std::stof(item, &used));
      while (used < item.size() && item[used] == ' ') ++used;
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw Error(key + " = \"" + text + "\": '" + item + "' is not a number");
    }
  }
  return v;
}

}  // namespace

ImageFolderScan scan_image_folder(const std::string& dir) {
  if (!is_dir(dir)) throw Error("image folder " + dir + ": not a directory (" + std::strerror(errno) + ")");
  ImageFolderScan scan;
  for (const std::string& name : list_dir(dir, "image folder")) {
    if (is_dir(dir + "/" + name)) scan.classes.push_back(name);
  }
  if (scan.classes.empty()) throw Error("image folder " + dir + ": no class sub-folders (DIR/CLASS/IMAGE.jpg)");
  for (size_t c = 0; c < scan.classes.size(); ++c) {
    std::string class_dir = dir + "/" + scan.classes[c];
    size_t before = scan.files.size();
    for (const std::string& name : list_dir(class_dir, "class folder")) {
      std::string path = class_dir + "/" + name;
      if (!has_image_extension(name) || is_dir(path)) continue;
      std::string why = skip_reason(path);
      if (!why.empty()) {
        scan.skipped.push_back(path + ": " + why);
        continue;
      }
      scan.files.push_back({path, static_cast<int32_t>(c)});
    }
    if (scan.files.size() == before) {
      throw Error("class folder " + class_dir + ": no usable .jpg, .jpeg or .png image (class '" + scan.classes[c] +
                  "' would never be seen; remove the folder or add images)");
    }
  }
  return scan;
}

void split_train_test(const std::vector<ImageFile>& files, double test_fraction, uint64_t seed,
                      std::vector<ImageFile>* train, std::vector<ImageFile>* test) {
  train->clear();
  test->clear();
  size_t begin = 0;
  while (begin < files.size()) {
    size_t end = begin;
    while (end < files.size() && files[end].label == files[begin].label) ++end;
    std::vector<size_t> order(end - begin);
    for (size_t i = 0; i < order.size(); ++i) order[i] = begin + i;
    PortableRng rng(mix_seed(seed, static_cast<uint64_t>(files[begin].label)));
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.next_u64() % i]);
    size_t n = order.size();
    size_t k = static_cast<size_t>(std::lround(static_cast<double>(n) * test_fraction));
    if (test_fraction > 0 && k == 0 && n >= 2) k = 1;
    k = std::min(k, n - 1);  // keep at least one training image per class
    std::vector<size_t> test_idx(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
    std::sort(test_idx.begin(), test_idx.end());
    std::vector<bool> in_test(n, false);
    for (size_t i : test_idx) in_test[i - begin] = true;
    for (size_t i = begin; i < end; ++i) (in_test[i - begin] ? test : train)->push_back(files[i]);
    begin = end;
  }
}

ChannelStats compute_channel_stats(const EncodedImages& images, int max_images) {
  ChannelStats stats;
  const size_t total = static_cast<size_t>(images.size());
  if (total == 0) return stats;
  size_t count = std::min(total, static_cast<size_t>(std::max(1, max_images)));
  double sum[3] = {0, 0, 0}, sq[3] = {0, 0, 0};
  double pixels = 0;
  for (size_t k = 0; k < count; ++k) {
    int64_t i = static_cast<int64_t>(k * total / count);
    std::vector<uint8_t> bytes = images.bytes(i);
    RgbImage image = decode_image(bytes.data(), bytes.size(), images.name(i));
    for (size_t p = 0; p < image.pixels.size(); p += 3) {
      for (int c = 0; c < 3; ++c) {
        double v = image.pixels[p + static_cast<size_t>(c)] / 255.0;
        sum[c] += v;
        sq[c] += v * v;
      }
    }
    pixels += static_cast<double>(image.pixels.size() / 3);
  }
  for (int c = 0; c < 3; ++c) {
    double mean = sum[c] / pixels;
    double var = std::max(sq[c] / pixels - mean * mean, 1e-12);
    stats.mean[static_cast<size_t>(c)] = static_cast<float>(mean);
    stats.std[static_cast<size_t>(c)] = static_cast<float>(std::sqrt(var));
  }
  return stats;
}

namespace {

Dataset image_dataset(std::shared_ptr<const EncodedImages> images, std::vector<int32_t> labels, int64_t num_classes,
                      const ImageTransform& t) {
  Dataset d;
  d.name = "image-folder";
  d.sample_shape = {3, t.image_size, t.image_size};
  d.num_classes = num_classes;
  d.labels = std::move(labels);
  d.source = std::make_shared<ImageSource>(std::move(images), t);
  return d;
}

// max_samples (0: all) files of a split as encoded images and labels.
Dataset folder_dataset(const std::vector<ImageFile>& files, size_t num_classes, int64_t max_samples,
                       const ImageTransform& t) {
  // The files are in class order: a limit keeps n images spread evenly over the list, so every class keeps
  // its share instead of the first classes keeping everything.
  const size_t total = files.size();
  size_t n = total;
  if (max_samples > 0) n = std::min(n, static_cast<size_t>(max_samples));
  std::vector<std::string> paths;
  std::vector<int32_t> labels;
  for (size_t k = 0; k < n; ++k) {
    const ImageFile& f = files[k * total / n];
    paths.push_back(f.path);
    labels.push_back(f.label);
  }
  return image_dataset(std::make_shared<ImageFiles>(std::move(paths)), std::move(labels),
                       static_cast<int64_t>(num_classes), t);
}

// data.image_size, data.decode_threads, data.mean/std (computed from `train` when empty), run.seed.
ImageTransform transform_from_config(const Config& cfg, const EncodedImages& train) {
  ImageTransform t;
  t.image_size = static_cast<int>(cfg.get_int("data.image_size"));
  t.resize = static_cast<int>(std::lround(t.image_size / 0.875));
  t.seed = static_cast<uint64_t>(cfg.get_int("run.seed"));
  t.threads = static_cast<int>(cfg.get_int("data.decode_threads"));
  if (cfg.get_bool("data.normalize")) {
    std::vector<float> mean = parse_floats(cfg.get_string("data.mean"), "data.mean");
    std::vector<float> std = parse_floats(cfg.get_string("data.std"), "data.std");
    if (mean.empty() != std.empty()) throw Error(cfg.origin() + ": give both data.mean and data.std, or neither");
    if (mean.empty()) {
      t.stats = compute_channel_stats(train, 256);
    } else {
      if (mean.size() != 3 || std.size() != 3) {
        throw Error(cfg.origin() + ": data.mean and data.std need 3 values each (R, G, B), got " +
                    std::to_string(mean.size()) + " and " + std::to_string(std.size()));
      }
      for (size_t c = 0; c < 3; ++c) {
        if (!(std[c] > 0)) throw Error(cfg.origin() + ": data.std values must be > 0");
        t.stats.mean[c] = mean[c];
        t.stats.std[c] = std[c];
      }
    }
  }
  return t;
}

void report_skipped(const ImageFolderScan& scan) {
  for (const std::string& s : scan.skipped) std::fprintf(stderr, "image-folder: skipped %s\n", s.c_str());
}

}  // namespace

ImageFolderSplits split_image_folder(const Config& cfg) {
  std::string dir = cfg.get_string("data.dir");
  ImageFolderSplits split;
  std::vector<ImageFile>& train = split.train;
  std::vector<ImageFile>& test = split.test;
  std::vector<std::string>& classes = split.classes;
  std::string test_dir = is_dir(dir + "/test") ? dir + "/test" : dir + "/val";
  if (is_dir(dir + "/train") && is_dir(test_dir)) {
    ImageFolderScan a = scan_image_folder(dir + "/train"), b = scan_image_folder(test_dir);
    report_skipped(a);
    report_skipped(b);
    if (a.classes != b.classes) {
      throw Error("image folder " + dir + ": " + dir + "/train has " + std::to_string(a.classes.size()) +
                  " classes and " + test_dir + " " + std::to_string(b.classes.size()) +
                  ", or their names differ: both need the same class sub-folders");
    }
    classes = a.classes;
    train = std::move(a.files);
    test = std::move(b.files);
  } else {
    ImageFolderScan a = scan_image_folder(dir);
    report_skipped(a);
    classes = a.classes;
    split_train_test(a.files, cfg.get_double("data.test_fraction"), static_cast<uint64_t>(cfg.get_int("run.seed")),
                     &train, &test);
  }
  if (classes.size() < 2) throw Error("image folder " + dir + ": one class sub-folder; classification needs two");
  if (test.empty()) throw Error("image folder " + dir + ": the test split is empty (raise data.test_fraction)");
  return split;
}

DataSplits load_image_folder(const Config& cfg) {
  ImageFolderSplits split = split_image_folder(cfg);
  const std::vector<ImageFile>& train = split.train;
  const std::vector<ImageFile>& test = split.test;
  const std::vector<std::string>& classes = split.classes;
  std::vector<std::string> train_paths;
  for (const ImageFile& f : train) train_paths.push_back(f.path);
  ImageTransform t = transform_from_config(cfg, ImageFiles(train_paths));
  DataSplits s;
  t.augment = cfg.get_bool("data.augment");
  s.train = folder_dataset(train, classes.size(), cfg.get_int("data.train_size"), t);
  t.augment = false;
  s.test = folder_dataset(test, classes.size(), cfg.get_int("data.test_size"), t);
  return s;
}

DataSplits load_packed_images(const Config& cfg) {
  auto open = [](const std::string& path, int64_t max_samples) {
    auto images = std::make_shared<PackedImages>(path);
    std::vector<int32_t> labels = images->labels();
    if (max_samples > 0 && max_samples < static_cast<int64_t>(labels.size())) {
      labels.resize(static_cast<size_t>(max_samples));
    }
    return std::make_pair(images, labels);
  };
  auto [train, train_labels] = open(cfg.get_string("data.train_path"), cfg.get_int("data.train_size"));
  auto [test, test_labels] = open(cfg.get_string("data.test_path"), cfg.get_int("data.test_size"));
  if (train->num_classes() != test->num_classes()) {
    throw Error(cfg.get_string("data.train_path") + " has " + std::to_string(train->num_classes()) + " classes, " +
                cfg.get_string("data.test_path") + " " + std::to_string(test->num_classes()));
  }
  ImageTransform t = transform_from_config(cfg, *train);
  DataSplits s;
  t.augment = cfg.get_bool("data.augment");
  s.train = image_dataset(train, std::move(train_labels), train->num_classes(), t);
  t.augment = false;
  s.test = image_dataset(test, std::move(test_labels), test->num_classes(), t);
  return s;
}

}  // namespace pshard::data
