// Transfer learning through real processes: `pshard train` saves an MLP trained on 10 classes; a 2-worker job on
// 5 classes starts from it (train.init_from; the classifier fc3 is reinitialised, named in the log) with and without
// train.freeze = "fc1". Frozen, fc1 ends bit-identical to the file, and the bytes the workers push and pull drop to
// the trainable tensors' share.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "tests/support/run_helpers.h"
#include "worker/trainer/model_file.h"

namespace {

using namespace pshard;
using pshard::testing::fresh_dir;
using pshard::testing::pshard_bin;
using pshard::testing::read_file;
using pshard::testing::run_with_timeout;

const char* kConfig = R"([data]
name = "synthetic-images"
image_shape = [3, 8, 8]
train_size = 256
test_size = 64

[model]
name = "mlp"
hidden = [32, 16]

[train]
epochs = 1
batch_size = 32
threads = 1

[optimizer]
name = "sgd"
lr = 0.05
momentum = 0.0
)";

std::map<std::string, trainer::NamedTensor> by_name(const std::string& path) {
  std::map<std::string, trainer::NamedTensor> m;
  for (trainer::NamedTensor& t : trainer::load_model_file(path)) m[t.name] = std::move(t);
  return m;
}

// The bytes the last epoch's workers sent and received, payload floats (float32 volume) and all.
struct Traffic {
  double sent = 0, recv = 0, fp32_sent = 0;
};

Traffic last_epoch_traffic(const std::string& run_dir) {
  std::istringstream lines(read_file(run_dir + "/metrics.jsonl"));
  Traffic t;
  for (std::string line; std::getline(lines, line);) {
    Json j = Json::parse(line, "metrics.jsonl");
    if (!j.has("event") || j.at("event").as_string() != "epoch") continue;
    t.sent = j.at("bytes_sent").as_number();
    t.recv = j.at("bytes_recv").as_number();
    t.fp32_sent = j.at("fp32_bytes_sent").as_number();
  }
  return t;
}

TEST(TransferLearning, InitFromAFileReplacesTheClassifierAndFrozenTensorsStayAndAreNotExchanged) {
  const std::string dir = fresh_dir("transfer");
  { std::ofstream(dir + "/job.toml") << kConfig; }
  const std::string base =
      pshard_bin() + " train --config " + dir + "/job.toml --set data.classes=10 --run-dir " + dir + "/source";
  ASSERT_EQ(run_with_timeout(base, 120, dir + "/source.log"), 0) << read_file(dir + "/source.log");
  const std::string source = dir + "/source/model.bin";

  auto job = [&](const std::string& name, const std::string& extra) {
    const std::string cmd =
        pshard_bin() + " launch --servers 1 --workers 2 --timeout 120 --config " + dir +
        "/job.toml --set data.classes=5 --set cluster.transport=tcp --set train.init_from=" + source + " " + extra +
        " --run-dir " + dir + "/" + name;
    const int rc = run_with_timeout(cmd, 180, dir + "/" + name + ".log");
    EXPECT_EQ(rc, 0) << read_file(dir + "/" + name + ".log");
    return rc == 0;
  };
  ASSERT_TRUE(job("frozen", "--set train.freeze=fc1"));
  ASSERT_TRUE(job("all", ""));

  const std::string log = read_file(dir + "/frozen.log");
  EXPECT_NE(log.find("reinitialised (shape differs): fc3.weight [5, 16] (file [10, 16]), fc3.bias [5] (file [10])"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("2 tensors (6176 parameters) frozen"), std::string::npos) << log;

  auto src = by_name(source), frozen = by_name(dir + "/frozen/model.bin"), all = by_name(dir + "/all/model.bin");
  for (const char* name : {"fc1.weight", "fc1.bias"}) {
    EXPECT_EQ(frozen.at(name).data, src.at(name).data) << name << " moved although frozen";
    EXPECT_NE(all.at(name).data, src.at(name).data) << name << " did not train without train.freeze";
  }
  EXPECT_NE(frozen.at("fc2.weight").data, src.at("fc2.weight").data);
  EXPECT_EQ(frozen.at("fc3.weight").shape, (std::vector<int64_t>{5, 16}));

  // Trainable: fc2 (32 x 16 + 16) and fc3 (16 x 5 + 5) = 613 of 6789 floats. Every step pushes and pulls exactly
  // those, so the float32 volume drops to that share; the bytes on the wire with it (plus the headers of 4 tensors'
  // messages instead of 6).
  const Traffic f = last_epoch_traffic(dir + "/frozen"), a = last_epoch_traffic(dir + "/all");
  std::printf("bytes sent frozen %.0f all %.0f (float32 %.0f / %.0f), received %.0f / %.0f\n", f.sent, a.sent,
              f.fp32_sent, a.fp32_sent, f.recv, a.recv);
  ASSERT_GT(a.fp32_sent, 0);
  EXPECT_NEAR(f.fp32_sent / a.fp32_sent, 613.0 / 6789.0, 1e-9);
  EXPECT_LT(f.sent, 0.15 * a.sent);
  EXPECT_LT(f.recv, 0.15 * a.recv);
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(TransferLearning, BadInitFilesAndFreezePrefixesAreRefusedNamingTheKey) {
  const std::string dir = fresh_dir("transfer-bad");
  {
    std::ofstream(dir + "/job.toml") << kConfig;
    std::ofstream(dir + "/text.bin") << "not a model";
  }
  struct Case {
    const char* settings;
    const char* message;
  };
  const Case cases[] = {
      {"--set train.init_from=/nonexistent/model.bin", "train.init_from: model file /nonexistent/model.bin"},
      {"--set train.init_from=TEXT", "not a pshard model file (bad magic)"},
      {"--set train.freeze=fc1,conv9", "train.freeze: model mlp: nothing to freeze under 'conv9'"},
      {"--set train.freeze=fc1,fc2,fc3", "every parameter would be frozen"},
  };
  int i = 0;
  for (const Case& c : cases) {
    std::string settings = c.settings;
    if (const size_t at = settings.find("TEXT"); at != std::string::npos) settings.replace(at, 4, dir + "/text.bin");
    const std::string log = dir + "/case" + std::to_string(i) + ".log";
    const std::string cmd = pshard_bin() + " train --config " + dir + "/job.toml " + settings + " --run-dir " + dir +
                            "/run" + std::to_string(i++);
    EXPECT_NE(run_with_timeout(cmd, 60, log), 0) << cmd;
    const std::string out = read_file(log);
    EXPECT_NE(out.find(c.message), std::string::npos) << cmd << "\n" << out;
  }
  pshard::testing::remove_dir_if_passed(dir);
}

}  // namespace
