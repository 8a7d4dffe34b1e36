// `pshard data`: convert a data set into packed record files, or describe a packed file.
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "app/command.h"
#include "common/config/config.h"
#include "common/error.h"
#include "common/util/args.h"
#include "worker/data/dataset.h"
#include "worker/data/image_folder.h"
#include "worker/data/packed.h"
#include "worker/data/random.h"

namespace pshard::app {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void print_info(const std::string& path, const data::PackedInfo& info) {
  if (info.encoded_images) {
    std::printf("%s: encoded images (pshard data pack), %lld images of %lld classes, %.1f MB\n", path.c_str(),
                static_cast<long long>(info.count), static_cast<long long>(info.num_classes),
                static_cast<double>(info.file_bytes) / 1e6);
    return;
  }
  std::printf("%s: %s, %lld samples of %s, %lld classes, target_dim %lld, %.1f MB\n", path.c_str(), info.name.c_str(),
              static_cast<long long>(info.count), shape_text(info.sample_shape).c_str(),
              static_cast<long long>(info.num_classes), static_cast<long long>(info.target_dim),
              static_cast<double>(info.file_bytes) / 1e6);
}

int run_convert(const std::vector<std::string>& args) {
  ArgParser p("pshard data convert",
              "read a data set (as `pshard train` would) and write its train and test splits as packed record files "
              "PREFIX-train.pshd and PREFIX-test.pshd");
  p.add_option("data", "NAME", "data set: fashion-mnist|mnist|cifar10|synthetic-regression|synthetic-images|packed",
               true);
  p.add_option("dir", "DIR", "folder of the source files (sets data.dir)");
  p.add_option("out", "PREFIX", "output path prefix", true);
  p.add_option("config", "FILE", "take data.* keys from this experiment config");
  p.add_multi("set", "KEY=VALUE", "override a config key, e.g. data.train_size=1000");
  if (!p.parse(args)) return 0;
  std::vector<std::string> overrides = {"data.name=" + p.get("data")};
  if (p.has("dir")) overrides.push_back("data.dir=" + p.get("dir"));
  for (const std::string& s : p.get_all("set")) overrides.push_back(s);
  Config cfg = Config::defaults();
  if (p.has("config")) cfg = Config::from_file(p.get("config"));
  for (const std::string& s : overrides) cfg.set(s);
  auto t0 = std::chrono::steady_clock::now();
  data::DataSplits splits = data::load_data(cfg);
  std::printf("loaded %s: %lld train + %lld test samples in %.3f s\n", splits.train.name.c_str(),
              static_cast<long long>(splits.train.size()), static_cast<long long>(splits.test.size()),
              seconds_since(t0));
  std::string train_path = p.get("out") + "-train.pshd", test_path = p.get("out") + "-test.pshd";
  data::write_packed(train_path, splits.train);
  data::write_packed(test_path, splits.test);
  print_info(train_path, data::read_packed_info(train_path));
  print_info(test_path, data::read_packed_info(test_path));
  std::printf("use with: --set data.name=packed --set data.train_path=%s --set data.test_path=%s\n", train_path.c_str(),
              test_path.c_str());
  return 0;
}

// Decodes every file on `threads` threads; returns the indices of those that decode, naming the others on stderr.
std::vector<int64_t> decodable(const data::ImageFiles& files, int threads) {
  const int64_t n = files.size();
  std::vector<std::string> why(static_cast<size_t>(n));
  auto work = [&](int k) {
    for (int64_t i = k; i < n; i += threads) {
      try {
        std::vector<uint8_t> b = files.bytes(i);
        data::decode_image(b.data(), b.size(), files.name(i));
      } catch (const std::exception& e) {
        why[static_cast<size_t>(i)] = e.what();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int k = 1; k < threads; ++k) pool.emplace_back(work, k);
  work(0);
  for (std::thread& t : pool) t.join();
  std::vector<int64_t> ok;
  for (int64_t i = 0; i < n; ++i) {
    if (why[static_cast<size_t>(i)].empty()) {
      ok.push_back(i);
    } else {
      std::fprintf(stderr, "pshard data pack: skipped %s\n", why[static_cast<size_t>(i)].c_str());
    }
  }
  return ok;
}

// Writes one split: the decodable files in a seeded shuffled order.
void pack_split(const std::string& path, const std::vector<data::ImageFile>& split, int64_t num_classes, uint64_t seed,
                int threads) {
  std::vector<std::string> paths;
  std::vector<int32_t> labels;
  for (const data::ImageFile& f : split) {
    paths.push_back(f.path);
    labels.push_back(f.label);
  }
  data::ImageFiles files(paths);
  std::vector<int64_t> order = decodable(files, threads);
  data::PortableRng rng(seed);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.next_u64() % i]);
  if (order.empty()) throw Error(path + ": no decodable image to pack");
  data::write_packed_images(path, files, labels, num_classes, order);
  data::PackedInfo info = data::read_packed_info(path);
  std::printf("%s: %lld images of %lld classes, %.1f MB\n", path.c_str(), static_cast<long long>(info.count),
              static_cast<long long>(info.num_classes), static_cast<double>(info.file_bytes) / 1e6);
}

int run_pack(const std::vector<std::string>& args) {
  ArgParser p("pshard data pack",
              "pack an image folder (DIR/CLASS/IMAGE.jpg, or DIR/train and DIR/test|val) into two packed record "
              "files of its encoded images, PREFIX-train.pshd and PREFIX-test.pshd, each shuffled, plus "
              "PREFIX-classes.txt; images that do not decode are named and left out");
  p.add_option("dir", "DIR", "the image folder", true);
  p.add_option("out", "PREFIX", "output path prefix", true);
  p.add_option("test-fraction", "F", "share of each class held out when DIR has no train/test folders (0.1)");
  p.add_option("seed", "N", "seed of the split and of the shuffle (1; as run.seed)");
  p.add_option("threads", "N", "decode threads checking the images (2)");
  if (!p.parse(args)) return 0;
  Config cfg = Config::defaults();
  cfg.set("data.dir=" + p.get("dir"));
  if (p.has("test-fraction")) cfg.set("data.test_fraction=" + p.get("test-fraction"));
  if (p.has("seed")) cfg.set("run.seed=" + p.get("seed"));
  if (p.has("threads")) cfg.set("data.decode_threads=" + p.get("threads"));
  auto t0 = std::chrono::steady_clock::now();
  data::ImageFolderSplits split = data::split_image_folder(cfg);
  uint64_t seed = static_cast<uint64_t>(cfg.get_int("run.seed"));
  int threads = static_cast<int>(cfg.get_int("data.decode_threads"));
  int64_t classes = static_cast<int64_t>(split.classes.size());
  std::string train_path = p.get("out") + "-train.pshd", test_path = p.get("out") + "-test.pshd";
  pack_split(train_path, split.train, classes, data::mix_seed(seed, 1), threads);
  pack_split(test_path, split.test, classes, data::mix_seed(seed, 2), threads);
  std::string classes_path = p.get("out") + "-classes.txt";
  std::ofstream names(classes_path, std::ios::trunc);
  for (const std::string& c : split.classes) names << c << "\n";
  if (!names.flush()) throw Error(classes_path + ": cannot write");
  std::printf("packed in %.1f s; class names (label order) in %s\n", seconds_since(t0), classes_path.c_str());
  std::printf("use with: --set data.name=packed --set data.train_path=%s --set data.test_path=%s\n", train_path.c_str(),
              test_path.c_str());
  return 0;
}

int run_info(const std::vector<std::string>& args) {
  ArgParser p("pshard data info", "check and describe packed record files (header only)");
  p.allow_positionals("FILE...", "packed files written by `pshard data convert`");
  p.add_flag("verify", "also read every sample and check the section checksums");
  if (!p.parse(args)) return 0;
  if (p.positionals().empty()) throw Error("pshard data info: give at least one FILE");
  for (const std::string& f : p.positionals()) {
    print_info(f, data::read_packed_info(f));
    if (p.flag("verify") && data::read_packed_info(f).encoded_images) {
      auto t0 = std::chrono::steady_clock::now();
      data::PackedImages images(f);
      for (int64_t i = 0; i < images.size(); ++i) {
        std::vector<uint8_t> b = images.bytes(i);
        data::decode_image(b.data(), b.size(), images.name(i));
      }
      std::printf("%s: read, checked and decoded %lld images in %.3f s\n", f.c_str(),
                  static_cast<long long>(images.size()), seconds_since(t0));
    } else if (p.flag("verify")) {
      auto t0 = std::chrono::steady_clock::now();
      data::Dataset d = data::read_packed(f);
      std::printf("%s: read and verified %lld samples in %.3f s\n", f.c_str(), static_cast<long long>(d.size()),
                  seconds_since(t0));
    }
  }
  return 0;
}

int run_data(const std::vector<std::string>& args) {
  const char* usage =
      "usage: pshard data <convert|pack|info> [options]\n\n"
      "  convert   write a data set's train and test splits as packed record files\n"
      "  pack      write an image folder's encoded images as packed record files\n"
      "  info      describe packed record files\n";
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(usage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "convert") return run_convert(rest);
  if (args[0] == "pack") return run_pack(rest);
  if (args[0] == "info") return run_info(rest);
  throw Error("unknown subcommand '" + args[0] + "' (convert|pack|info)");
}

}  // namespace

PSHARD_COMMAND(data, "convert data sets or image folders to packed record files, describe packed files", run_data);

}  // namespace pshard::app
