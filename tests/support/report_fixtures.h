// Fixture run directories with known numbers for the report tests.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace pshard::testing {

// A temporary folder removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pshard-report-XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::trunc) << text;
}

inline std::string fixture_config(const std::string& name, const std::string& extra = "") {
  return "[run]\nname = \"" + name + "\"\nseed = 1\n\n[model]\nname = \"mlp\"\nhidden = [256, 128]\n\n[optimizer]\n" +
         "name = \"sgd\"\nlr = 0.10000000000000001\n" + extra + "\n[train]\nbatch_size = 32\nepochs = 2\n";
}

// A scaling study with model_bytes = 1e6, two epochs per run:
//   W=1: 100 steps/epoch, epoch_s 10+10, compute 8+8, comm 0,  sent=recv 1e8 per epoch
//   W=2:  50 steps/epoch, epoch_s  6+4,  compute 3+3, comm 1+1, sent=recv 1e8 per epoch
//   W=4:  25 steps/epoch, epoch_s  4+4,  compute 2+2, comm 1.5+1.5, sent=recv 1e8 per epoch
// `compressed`: the epoch lines also carry fp32_bytes_sent/recv of twice the bytes (bf16 both ways); else they have
// none (a run recorded before compression existed).
inline std::string scaling_metrics(int workers, bool compressed = true) {
  const std::string fp32 = compressed ? ",\"fp32_bytes_sent\":200000000,\"fp32_bytes_recv\":200000000" : "";
  int steps = 100 / workers;
  double e1 = workers == 1 ? 10 : workers == 2 ? 6 : 4;
  double e2 = workers == 1 ? 10 : 4;
  double compute = workers == 1 ? 8 : workers == 2 ? 3 : 2;
  double comm = workers == 1 ? 0 : workers == 2 ? 1 : 1.5;
  auto epoch = [&](int e, double epoch_s, double wall) {
    return "{\"event\":\"epoch\",\"epoch\":" + std::to_string(e) + ",\"step\":" + std::to_string(steps * e) +
           ",\"train_loss\":" + std::to_string(1.0 / e) + ",\"train_acc\":" + std::to_string(0.5 + 0.2 * e) +
           ",\"test_loss\":" + std::to_string(1.2 / e) + ",\"test_acc\":" + std::to_string(0.45 + 0.2 * e) +
           ",\"samples_per_s\":" + std::to_string(3200.0 / epoch_s) + ",\"epoch_s\":" + std::to_string(epoch_s) +
           ",\"eval_s\":0.5,\"compute_s\":" + std::to_string(compute) + ",\"comm_wait_s\":" + std::to_string(comm) +
           ",\"bytes_sent\":100000000,\"bytes_recv\":100000000" + fp32 + ",\"wall_s\":" + std::to_string(wall) + "}\n";
  };
  std::string text;
  for (int s = 0; s < 2 * steps; s += steps / 5) {
    text += "{\"event\":\"step\",\"epoch\":" + std::to_string(1 + s / steps) + ",\"step\":" + std::to_string(s) +
            ",\"loss\":" + std::to_string(2.0 / (1 + s)) +
            ",\"lr\":0.1,\"wall_s\":" + std::to_string(s * (e1 + e2) / (2 * steps)) + "}\n";
  }
  text += epoch(1, e1, e1 + 0.5);
  text += epoch(2, e2, e1 + e2 + 1.0);
  text +=
      "{\"event\":\"summary\",\"test_acc\":0.85,\"test_loss\":0.6,\"train_loss\":0.5,\"train_acc\":0.9,"
      "\"samples_per_s\":" +
      std::to_string(6400.0 / (e1 + e2)) + ",\"wall_s\":" + std::to_string(e1 + e2 + 1.0) +
      ",\"epochs\":2,\"steps\":" + std::to_string(2 * steps) +
      ",\"model\":\"mlp\",\"optimizer\":\"sgd\",\"lr\":0.1,\"batch_size\":32,\"global_batch\":" +
      std::to_string(32 * workers) + ",\"model_bytes\":1000000,\"compute_s\":" + std::to_string(2 * compute) +
      ",\"comm_wait_s\":" + std::to_string(2 * comm) +
      ",\"bytes_sent\":200000000,\"bytes_recv\":200000000,\"workers\":" + std::to_string(workers) +
      ",\"servers\":2,\"mode\":\"sync\",\"workers_finished\":[]}\n";
  return text;
}

// Writes runs w1, w2, w4 under `root` and returns their directories.
inline std::vector<std::string> write_scaling_fixture(const std::string& root) {
  std::vector<std::string> dirs;
  for (int w : {1, 2, 4}) {
    std::string dir = root + "/w" + std::to_string(w);
    write_text(dir + "/config.toml", fixture_config("w" + std::to_string(w)));
    write_text(dir + "/metrics.jsonl", scaling_metrics(w));
    dirs.push_back(dir);
  }
  return dirs;
}

}  // namespace pshard::testing
