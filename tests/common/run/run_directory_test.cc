// Run directories and resume settings: the fresh-directory rule, refusing or moving aside a used directory, the
// run id file, and which settings may change on resume (common/run/).
#include "common/run/run_directory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/run/run_settings.h"

namespace pshard {
namespace {

namespace fs = std::filesystem;

// A fresh working directory for one test; the test runs with it as the cwd (runs/<name> is relative).
class RunDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    old_ = fs::current_path();
    dir_ = "/tmp/pshard-rundir-test-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::current_path(dir_);
  }
  void TearDown() override {
    fs::current_path(old_);
    fs::remove_all(dir_);
  }
  static void touch(const std::string& path) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << "x";
  }
  fs::path old_;
  std::string dir_;
};

TEST_F(RunDirectoryTest, WithoutADirectoryTheFirstFreeNameIsChosen) {
  EXPECT_EQ(choose_new_run_dir("", "mlp", false, "pshard launch", ""), "runs/mlp");
  touch("runs/mlp/metrics.jsonl");
  EXPECT_EQ(choose_new_run_dir("", "mlp", false, "pshard launch", ""), "runs/mlp.1");
  touch("runs/mlp.1/checkpoints/server-0.step-00000010.ckpt");
  fs::create_directories("runs/mlp.2/keys");  // a directory without run files is free
  EXPECT_EQ(choose_new_run_dir("", "mlp", false, "pshard launch", ""), "runs/mlp.2");
  EXPECT_TRUE(fs::exists("runs/mlp/metrics.jsonl"));  // nothing moved
}

TEST_F(RunDirectoryTest, AUsedDirectoryIsRefusedOrMovedAside) {
  EXPECT_EQ(choose_new_run_dir("d", "mlp", false, "pshard launch", "`pshard launch --resume d`"), "d");
  touch("d/config.toml");
  touch("d/model.bin");
  try {
    choose_new_run_dir("d", "mlp", false, "pshard launch", "`pshard launch --resume d`");
    ADD_FAILURE() << "a used directory was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "pshard launch: --run-dir d already holds a run (config.toml, model.bin): continue it with `pshard "
              "launch --resume d`, or add --start-over to move its files to d.old-1 and start a new run there");
  }
  std::string moved;
  EXPECT_EQ(choose_new_run_dir("d", "mlp", true, "pshard launch", "", &moved), "d");
  EXPECT_EQ(moved, "d.old-1");
  EXPECT_TRUE(fs::exists("d.old-1/model.bin"));
  EXPECT_FALSE(fs::exists("d"));
  touch("d/metrics.csv");
  EXPECT_EQ(choose_new_run_dir("d", "mlp", true, "pshard train", "", &moved), "d");
  EXPECT_EQ(moved, "d.old-2");  // the first free name: nothing is overwritten
  EXPECT_TRUE(fs::exists("d.old-1/model.bin"));
}

TEST_F(RunDirectoryTest, RunIdRoundTrip) {
  EXPECT_EQ(read_run_id("r"), "");
  const std::string id = new_run_id();
  EXPECT_EQ(id.size(), 16u);
  EXPECT_NE(id, new_run_id());
  write_run_id("r", id);
  EXPECT_EQ(read_run_id("r"), id);
  EXPECT_EQ(run_files_in("r"), std::vector<std::string>{"run-id"});
}

TEST(RunSettings, OnlyHowARunRunsMayChangeOnResume) {
  for (const char* key : {"checkpoint.keep", "log.level", "train.log_every", "cluster.heartbeat_timeout_ms",
                          "cluster.server_failure_policy", "security.curve", "run.name"}) {
    EXPECT_TRUE(may_change_on_resume(key)) << key;
  }
  for (const char* key : {"train.epochs", "train.batch_size", "optimizer.lr", "lr_schedule.name", "run.seed",
                          "model.name", "data.train_size", "cluster.mode", "cluster.slice_bytes"}) {
    EXPECT_FALSE(may_change_on_resume(key)) << key;
  }
}

TEST(RunSettings, ChangesAndHashFollowTheFixedSettingsOnly) {
  const Config run = Config::defaults();
  Config now = Config::defaults();
  now.set("checkpoint.keep=7");
  now.set("train.log_every=3");
  EXPECT_TRUE(fixed_setting_changes(run, now).empty());
  EXPECT_EQ(fixed_settings_hash(run), fixed_settings_hash(now));
  now.set("train.epochs=8");
  now.set("train.batch_size=16");
  const std::vector<FixedSettingChange> changes = fixed_setting_changes(run, now);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].key, "train.batch_size");
  EXPECT_EQ(changes[0].before, "64");
  EXPECT_EQ(changes[0].after, "16");
  EXPECT_EQ(changes[1].key, "train.epochs");
  EXPECT_EQ(changes[1].after, "8");
  EXPECT_NE(fixed_settings_hash(run), fixed_settings_hash(now));
}

}  // namespace
}  // namespace pshard
