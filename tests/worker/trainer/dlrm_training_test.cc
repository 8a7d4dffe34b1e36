// pshard's own DLRM trained in one process on click data, its tables held by the trainer's sync as one server of a
// sync job holds them: synthetic clicks (the test AUC climbs towards the generator's bound) and a Criteo file.
// Label integration: whole training runs, kept out of the sanitizer phases' unit selection.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/error.h"
#include "common/metrics/ctr_metrics.h"
#include "tests/worker/trainer/local_training.h"
#include "worker/data/dataset.h"

namespace {

using namespace pshard;
using pshard::testing::train;
using pshard::testing::TrainedRun;

const char* kDlrm = R"(
[run]
seed = 3
[data]
name = "synthetic-ctr"
train_size = 200000
test_size = 5000
fields = 4
cardinality = 200
dense_features = 4
[model]
name = "dlrm"
embedding_dim = 16
bottom_hidden = [32]
hidden = [64]
[train]
epochs = 4
batch_size = 128
threads = 1
[optimizer]
name = "adam"
lr = 0.001
[embedding]
optimizer = "adagrad"
lr = 0.05
)";

// pshard's own DLRM on click data, its tables held by the trainer's sync as a server would hold them: the test AUC
// (a figure of each epoch) climbs towards the generator's bound, the bound the run reports is the generator's on the
// same test set, and the figures' log loss is the test loss.
TEST(LocalTrainer, DlrmOnSyntheticClicksApproachesTheBound) {
  const Config cfg = Config::from_string(kDlrm, "dlrm.toml");
  const TrainedRun run = train(cfg);
  const data::DataSplits data = data::load_data(cfg);
  std::vector<float> clicks(data.test.labels.begin(), data.test.labels.end());
  const double bound = auc(data.test.click_prob.data(), clicks.data(), clicks.size());
  ASSERT_EQ(run.epochs.size(), 4u);
  std::vector<double> aucs;
  for (const WorkerEpochReport& e : run.epochs) {
    aucs.push_back(e.figures.at("test_auc"));
    std::printf("epoch %lld: test AUC %.4f (bound %.4f), log loss %.4f\n", static_cast<long long>(e.epoch), aucs.back(),
                bound, e.figures.at("test_logloss"));
    EXPECT_NEAR(e.figures.at("test_logloss"), e.test_loss_sum / static_cast<double>(e.test_n), 1e-4);
    EXPECT_EQ(e.figures.at("test_auc_bound"), bound);
  }
  for (size_t e = 1; e < aucs.size(); ++e) EXPECT_GT(aucs[e], aucs[e - 1]);
  // 0.798 against a bound of 0.826 after 4 epochs (and still climbing): far above the 0.61 the dense features allow.
  EXPECT_GT(aucs.back(), bound - 0.04);
  EXPECT_LE(aucs.back(), bound + 0.01);
}

// A small Criteo file the test writes (data.name = criteo): the label is 1 exactly when the first categorical field's
// hash is odd, so only that field's rows carry the answer; pshard's DLRM learns it through its table, with the hashes
// bucketed into tables of row indices (data.cardinality) and unbucketed into hashed tables (embedding.hashed_rows),
// and a hashed field without hashed tables is refused naming both keys.
TEST(LocalTrainer, DlrmLearnsAClickThatOneCriteoFieldDecides) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("pshard-criteo-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  std::mt19937 rng(11);
  for (const char* split : {"train", "test"}) {
    std::ofstream out(dir + "/" + split + ".txt");
    for (int line = 0; line < (std::string(split) == "train" ? 8000 : 2000); ++line) {
      const unsigned c1 = 0x100u + rng() % 40;  // 40 distinct hashes in C1, half of them odd
      out << (c1 % 2);
      for (int j = 0; j < 13; ++j) out << '\t' << rng() % 100;
      for (int j = 0; j < 26; ++j) {
        char hex[9];
        // The other fields' hashes spread over the 32 bits, as Criteo's do: far beyond any table of row indices.
        std::snprintf(hex, sizeof(hex), "%08x", j == 0 ? c1 : static_cast<unsigned>(rng() % 1000) * 4000037u);
        out << '\t' << hex;
      }
      out << '\n';
    }
  }
  const std::vector<std::string> files = {"data.name=criteo",
                                          "data.train_path=" + dir + "/train.txt",
                                          "data.test_path=" + dir + "/test.txt",
                                          "data.train_size=0",
                                          "data.test_size=0",
                                          "train.epochs=3"};
  auto with = [&](std::vector<std::string> sets) {
    sets.insert(sets.begin(), files.begin(), files.end());
    return Config::from_string(kDlrm, "dlrm.toml", sets);
  };
  const TrainedRun bucketed = train(with({"data.cardinality=1000"}));
  const TrainedRun hashed = train(with({"data.cardinality=0", "embedding.hashed_rows=2000"}));
  std::string refused;
  try {
    train(with({"data.cardinality=0"}));
  } catch (const Error& e) {
    refused = e.what();
  }
  std::filesystem::remove_all(dir);
  for (const TrainedRun* run : {&bucketed, &hashed}) {
    ASSERT_EQ(run->epochs.size(), 3u);
    const WorkerEpochReport& last = run->epochs.back();
    EXPECT_EQ(last.test_n, 2000);
    EXPECT_EQ(last.figures.count("test_auc_bound"), 0u);  // a file's labels come with no true probabilities
    std::printf("%s: test AUC %.4f\n", run == &bucketed ? "buckets" : "hashed", last.figures.at("test_auc"));
    EXPECT_GT(last.figures.at("test_auc"), 0.97);
  }
  EXPECT_NE(refused.find("categorical field 0 has unbounded ids"), std::string::npos) << refused;
  EXPECT_NE(refused.find("set embedding.hashed_rows, or data.cardinality"), std::string::npos) << refused;
}

}  // namespace
