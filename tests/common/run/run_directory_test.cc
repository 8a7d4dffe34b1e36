// Run directories and resume settings: the fresh-directory rule, refusing or moving aside a used directory, the
// run id file, and which settings may change on resume (common/run/).
#include "common/run/run_directory.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/config/schema.h"
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
  EXPECT_EQ(claim_new_run_dir("", "mlp", false, "pshard launch", "").path, "runs/mlp");
  touch("runs/mlp/metrics.jsonl");
  EXPECT_EQ(claim_new_run_dir("", "mlp", false, "pshard launch", "").path, "runs/mlp.1");
  touch("runs/mlp.1/checkpoints/server-0.step-00000010.ckpt");
  fs::create_directories("runs/mlp.2/keys");  // a directory without run files is free
  EXPECT_EQ(claim_new_run_dir("", "mlp", false, "pshard launch", "").path, "runs/mlp.2");
  EXPECT_TRUE(fs::exists("runs/mlp/metrics.jsonl"));  // nothing moved
}

TEST_F(RunDirectoryTest, AUsedDirectoryIsRefusedOrMovedAside) {
  EXPECT_EQ(claim_new_run_dir("d", "mlp", false, "pshard launch", "`pshard launch --resume d`").path, "d");
  touch("d/config.toml");
  touch("d/model.bin");
  try {
    claim_new_run_dir("d", "mlp", false, "pshard launch", "`pshard launch --resume d`");
    ADD_FAILURE() << "a used directory was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "pshard launch: --run-dir d already holds a run (config.toml, model.bin): continue it with `pshard "
              "launch --resume d`, or add --start-over to move its files to d.old-1 and start a new run there");
  }
  NewRunDir moved = claim_new_run_dir("d", "mlp", true, "pshard launch", "");
  EXPECT_EQ(moved.path, "d");
  EXPECT_EQ(moved.moved_to, "d.old-1");
  EXPECT_TRUE(fs::exists("d.old-1/model.bin"));
  EXPECT_TRUE(run_files_in("d").empty());
  moved.claim.release();
  touch("d/metrics.csv");
  moved = claim_new_run_dir("d", "mlp", true, "pshard train", "");
  EXPECT_EQ(moved.path, "d");
  EXPECT_EQ(moved.moved_to, "d.old-2");  // the first free name: nothing is overwritten
  EXPECT_TRUE(fs::exists("d.old-1/model.bin"));
}

TEST_F(RunDirectoryTest, StartOverAcceptsATrailingSlash) {
  touch("d/metrics.jsonl");
  const NewRunDir moved = claim_new_run_dir("d/", "mlp", true, "pshard launch", "");
  EXPECT_EQ(moved.path, "d");
  EXPECT_EQ(moved.moved_to, "d.old-1");
  EXPECT_TRUE(fs::exists("d.old-1/metrics.jsonl"));
}

TEST_F(RunDirectoryTest, AClaimedDirectoryIsRefusedNamingItsHolder) {
  const NewRunDir first = claim_new_run_dir("d", "mlp", false, "pshard launch", "");
  // flock() locks belong to an open file: a second claim from this same process conflicts like another process's.
  try {
    claim_new_run_dir("d", "mlp", false, "pshard launch", "");
    ADD_FAILURE() << "a claimed directory was accepted twice";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("pshard launch: the run directory d is in use by process " + std::to_string(::getpid()) +
                        " on host "),
              std::string::npos)
        << what;
  }
  try {
    claim_new_run_dir("d/", "mlp", true, "pshard train", "");  // --start-over does not move a claimed run either
    ADD_FAILURE() << "a claimed directory was moved aside";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is in use by process"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists("d.old-1"));
  // Without --run-dir, a claimed runs/<name> is passed over like a used one.
  const NewRunDir a = claim_new_run_dir("", "mlp", false, "pshard launch", "");
  const NewRunDir b = claim_new_run_dir("", "mlp", false, "pshard launch", "");
  EXPECT_EQ(a.path, "runs/mlp");
  EXPECT_EQ(b.path, "runs/mlp.1");
}

TEST_F(RunDirectoryTest, AClaimEndsWithItsHolder) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    RunDirClaim held = RunDirClaim::take("d", "pshard launch");
    ::_exit(0);  // no destructor runs: the lock ends with the process
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  RunDirClaim again = RunDirClaim::take("d", "pshard launch");
  EXPECT_TRUE(again.held());
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

// A run refused before its first step wrote its start line and the failures that ended it: it is given back. A step
// line, an epoch, a summary or an unreadable line means it trained: the files stay.
TEST_F(RunDirectoryTest, AnUntrainedRunIsGivenBackATrainedOneIsKept) {
  const auto write = [](const std::string& dir, const std::string& lines) {
    fs::create_directories(dir);
    write_run_id(dir, new_run_id());
    std::ofstream(dir + "/config.toml") << "[train]\n";
    std::ofstream(dir + "/metrics.jsonl") << lines;
  };
  write("untrained", "{\"event\":\"start\"}\n{\"event\":\"failure\",\"role\":\"worker\",\"rank\":0}\n");
  EXPECT_TRUE(give_back_untrained_run_dir("untrained"));
  EXPECT_TRUE(run_files_in("untrained").empty());
  for (const std::string line : {"{\"event\":\"step\",\"step\":0}", "{\"event\":\"epoch\"}", "not json"}) {
    fs::remove_all("trained");
    write("trained", "{\"event\":\"start\"}\n" + line + "\n");
    EXPECT_FALSE(give_back_untrained_run_dir("trained")) << line;
    EXPECT_FALSE(run_files_in("trained").empty()) << line;
  }
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
  // The schema's column: whole sections of how a run is logged, checkpointed and secured; nothing it does not know.
  for (const ConfigKey& k : config_schema()) {
    const std::string key = k.key;
    if (key.rfind("log.", 0) == 0 || key.rfind("checkpoint.", 0) == 0 || key.rfind("security.", 0) == 0) {
      EXPECT_TRUE(may_change_on_resume(key)) << key;
    }
  }
  EXPECT_FALSE(may_change_on_resume("no.such_key"));
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
