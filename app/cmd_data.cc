// `pshard data`: convert a data set into packed record files, or describe a packed file.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "app/command.h"
#include "common/config/config.h"
#include "common/error.h"
#include "common/util/args.h"
#include "worker/data/dataset.h"
#include "worker/data/packed.h"

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

int run_info(const std::vector<std::string>& args) {
  ArgParser p("pshard data info", "check and describe packed record files (header only)");
  p.allow_positionals("FILE...", "packed files written by `pshard data convert`");
  p.add_flag("verify", "also read every sample and check the section checksums");
  if (!p.parse(args)) return 0;
  if (p.positionals().empty()) throw Error("pshard data info: give at least one FILE");
  for (const std::string& f : p.positionals()) {
    print_info(f, data::read_packed_info(f));
    if (p.flag("verify")) {
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
      "usage: pshard data <convert|info> [options]\n\n"
      "  convert   write a data set's train and test splits as packed record files\n"
      "  info      describe packed record files\n";
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(usage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "convert") return run_convert(rest);
  if (args[0] == "info") return run_info(rest);
  throw Error("unknown subcommand '" + args[0] + "' (convert|info)");
}

}  // namespace

PSHARD_COMMAND(data, "convert data sets to packed record files, describe packed files", run_data);

}  // namespace pshard::app
