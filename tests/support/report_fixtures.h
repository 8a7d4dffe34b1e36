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

// A scaling study with model_bytes = 1e6, two epochs per run; phases per epoch (mean over workers)
// data / forward / backward / comm / other:
//   W=1: 100 steps/epoch, epoch_s 10+10, 0.5 / 3 / 5 / 0 / 1.5,         sent=recv 1e8 per epoch
//   W=2:  50 steps/epoch, epoch_s  6+4,  0.25 / 1 / 2 / 1 / 0.5,        sent=recv 1e8 per epoch
//   W=4:  25 steps/epoch, epoch_s  4+4,  0.25 / 0.5 / 1.5 / 1.5 / 0.25, sent=recv 1e8 per epoch
// Step lines of every worker every steps/5 steps: worker r's step i takes (10 + i % 7 + 5 r) ms, split
// 10 / 20 / 40 / 20 / 10 % over the phases. W=2's summary lists two servers' phases.
// `compressed`: the epoch lines also carry fp32_bytes_sent/recv of twice the bytes (bf16 both ways); else they have
// none (a run recorded before compression existed).
inline std::string scaling_metrics(int workers, bool compressed = true) {
  const std::string fp32 = compressed ? ",\"fp32_bytes_sent\":200000000,\"fp32_bytes_recv\":200000000" : "";
  int steps = 100 / workers;
  double e1 = workers == 1 ? 10 : workers == 2 ? 6 : 4;
  double e2 = workers == 1 ? 10 : 4;
  const std::string phases =
      workers == 1   ? "\"data_s\":0.5,\"forward_s\":3,\"backward_s\":5,\"comm_wait_s\":0,\"other_s\":1.5"
      : workers == 2 ? "\"data_s\":0.25,\"forward_s\":1,\"backward_s\":2,\"comm_wait_s\":1,"
                       "\"other_s\":0.5"
                     : "\"data_s\":0.25,\"forward_s\":0.5,\"backward_s\":1.5,\"comm_wait_s\":1.5,"
                       "\"other_s\":0.25";
  auto epoch = [&](int e, double epoch_s, double wall) {
    return "{\"event\":\"epoch\",\"epoch\":" + std::to_string(e) + ",\"step\":" + std::to_string(steps * e) +
           ",\"train_loss\":" + std::to_string(1.0 / e) + ",\"train_acc\":" + std::to_string(0.5 + 0.2 * e) +
           ",\"test_loss\":" + std::to_string(1.2 / e) + ",\"test_acc\":" + std::to_string(0.45 + 0.2 * e) +
           ",\"samples_per_s\":" + std::to_string(3200.0 / epoch_s) + ",\"epoch_s\":" + std::to_string(epoch_s) +
           ",\"eval_s\":0.5," + phases + ",\"bytes_sent\":100000000,\"bytes_recv\":100000000" + fp32 +
           ",\"wall_s\":" + std::to_string(wall) + "}\n";
  };
  std::string text;
  for (int s = 0; s < 2 * steps; s += steps / 5) {
    for (int r = 0; r < workers; ++r) {
      const double t = (10 + s % 7 + 5 * r) * 1e-3;
      text += "{\"event\":\"step\",\"rank\":" + std::to_string(r) + ",\"epoch\":" + std::to_string(1 + s / steps) +
              ",\"step\":" + std::to_string(s) + ",\"loss\":" + std::to_string(2.0 / (1 + s + r)) +
              ",\"lr\":0.1,\"wall_s\":" + std::to_string(s * (e1 + e2) / (2 * steps)) +
              ",\"step_s\":" + std::to_string(t) + ",\"data_s\":" + std::to_string(0.1 * t) +
              ",\"forward_s\":" + std::to_string(0.2 * t) + ",\"backward_s\":" + std::to_string(0.4 * t) +
              ",\"comm_wait_s\":" + std::to_string(0.2 * t) + ",\"other_s\":" + std::to_string(0.1 * t) + "}\n";
    }
  }
  text += epoch(1, e1, e1 + 0.5);
  text += epoch(2, e2, e1 + e2 + 1.0);
  text +=
      "{\"event\":\"summary\",\"test_acc\":0.85,\"test_loss\":0.6,\"train_loss\":0.5,\"train_acc\":0.9,"
      "\"samples_per_s\":" +
      std::to_string(6400.0 / (e1 + e2)) + ",\"wall_s\":" + std::to_string(e1 + e2 + 1.0) +
      ",\"epochs\":2,\"steps\":" + std::to_string(2 * steps) +
      ",\"model\":\"mlp\",\"optimizer\":\"sgd\",\"lr\":0.1,\"batch_size\":32,\"global_batch\":" +
      std::to_string(32 * workers) + ",\"model_bytes\":1000000," +
      (workers == 2
           ? "\"server_phases\":[{\"rank\":0,\"threads\":3,\"wall_s\":10,\"recv_s\":1,\"aggregate_s\":2,"
             "\"update_s\":3,\"reply_s\":1,\"idle_s\":22,\"other_s\":1},{\"rank\":1,\"threads\":3,\"wall_s\":10,"
             "\"recv_s\":2,\"aggregate_s\":2,\"update_s\":3,\"reply_s\":1,\"idle_s\":21,\"other_s\":1}],"
           : "") +
      (workers == 4 ? "\"num_hosts\":2,\"network_bytes_per_host_step\":2100000,\"shm_bytes_per_host_step\":6000000,"
                    : "") +
      "\"bytes_sent\":200000000,\"bytes_recv\":200000000,\"workers\":" + std::to_string(workers) +
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
