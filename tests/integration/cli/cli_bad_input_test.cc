// Every row of docs/BAD_INPUT.md that a user types: the pshard executable exits non-zero, within a
// bounded time, with one error line naming what was wrong.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/util/child_process.h"
#include "models/zoo/registry.h"
#include "tests/support/run_helpers.h"

namespace pshard {
namespace {

using testing::pshard_bin;
using testing::source_dir;

struct Case {
  std::vector<std::string> args;  // after "pshard"
  int exit_code;
  std::string message;  // must appear in the output
};

class CliBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/pshard_cli_bad_input_" + std::to_string(::getpid());
    ASSERT_EQ(std::system(("mkdir -p " + dir_).c_str()), 0);
    std::ofstream(dir_ + "/syntax.toml") << "[train]\nepochs = \n";
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  void expect(const Case& c) {
    std::vector<std::string> argv = {pshard_bin()};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    std::string cmd;
    for (const std::string& a : c.args) cmd += " " + a;
    const std::string log = dir_ + "/out.log";
    std::remove(log.c_str());
    ChildResult r = run_child(argv, log, 60);
    std::ifstream in(log);
    std::stringstream out;
    out << in.rdbuf();
    EXPECT_FALSE(r.timed_out) << "pshard" << cmd;
    EXPECT_EQ(r.exit_code, c.exit_code) << "pshard" << cmd << "\n" << out.str();
    EXPECT_NE(out.str().find(c.message), std::string::npos)
        << "pshard" << cmd << ": expected '" << c.message << "' in:\n"
        << out.str();
  }

  std::string dir_;
};

TEST_F(CliBadInput, CommandLines) {
  const std::string cfg = source_dir() + "/configs/linreg_sgd.toml";
  const std::vector<Case> cases = {
      {{"frob"}, 2, "pshard: unknown command 'frob'"},
      {{"launch", "--bogus"}, 1, "pshard launch: error: unknown option --bogus (see --help)"},
      {{"launch", "--servers", "x", "--workers", "1", "--config", cfg},
       1,
       "option --servers expects an integer, got 'x'"},
      {{"launch", "--servers", "1", "--workers", "1"}, 1, "--config FILE is required"},
      {{"launch", "--workers", "1", "--config", cfg}, 1, "pshard launch: error: --servers is required"},
      {{"launch", "--hosts", "a:1,a:2", "--config", cfg}, 1, "--hosts a:1,a:2: a is listed twice"},
      {{"launch", "--hosts", "a:2,b:2", "--workers", "5", "--config", cfg},
       1,
       "--workers 5 differs from the 4 workers of --hosts a:2,b:2"},
      {{"launch", "--servers", "1", "--workers", "1", "--config", cfg, "--remote-pshard", "/x"},
       1,
       "--remote-pshard goes with --hosts"},
      {{"launch", "--servers", "0", "--workers", "1", "--config", cfg}, 1, "--servers must be in 1..1024, got 0"},
      {{"launch", "--servers", "1", "--workers", "1", "--config", cfg, "--grace-ms", "-1"},
       1,
       "pshard launch: error: --grace-ms must be in 0..3600000 (milliseconds), got -1"},
      {{"launch", "--servers", "1", "--workers", "1", "--config", cfg, "--timeout", "-5"},
       1,
       "pshard launch: error: --timeout must be in 0..31536000 (seconds; 0: no limit), got -5"},
      {{"sweep", "--config", cfg, "--grid", "foo"}, 1, "--grid 'foo': expected KEY=V1,V2,..."},
      {{"report", dir_ + "/nothing"}, 1, "not a run directory (no metrics.jsonl) and not a folder of runs"},
      {{"data", "convert"}, 1, "option --data is required"},
      {{"coordinator", "--servers", "1", "--workers", "1", "--run-dir", dir_ + "/syntax.toml"},
       1,
       "pshard coordinator: error: cannot create directory " + dir_ +
           "/syntax.toml: a file of that name exists and is not a directory"},
  };
  for (const Case& c : cases) expect(c);
}

// A full disk under the run directory (/dev/full: every write fails with ENOSPC): the run goes on, the
// failure is named once with the path, and the exit status says the records are incomplete (3). A
// metrics.jsonl cut short by such a failure still reads: `pshard report` names the torn line, skips it.
TEST_F(CliBadInput, RecordsOnAFullDisk) {
  // A file size limit (ulimit -f; SIGXFSZ ignored, so writes fail with EFBIG) stands in for a full disk:
  // the run directory is fresh (a used one is refused), config.toml fits (about 2.1 kB: every key of the schema),
  // metrics.jsonl soon does not (a step line per step). sh counts the limit in 512-byte blocks: 4096 bytes.
  const std::string run = dir_ + "/full";
  const std::string log = dir_ + "/full.log";
  const std::string cmd = "trap '' XFSZ; ulimit -f 8; exec " + pshard_bin() + " train --config " + source_dir() +
                          "/configs/linreg_sgd.toml --set train.epochs=1 --set train.log_every=1 --run-dir " + run;
  ChildResult r = run_child({"/bin/sh", "-c", cmd}, log, 60);
  std::ifstream in(log);
  std::stringstream out;
  out << in.rdbuf();
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 74) << out.str();
  EXPECT_NE(out.str().find("metrics " + run +
                           "/metrics.jsonl: write failed: File too large; no more lines go to it, "
                           "the run's records are incomplete"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("pshard train: the run's records in " + run + " are incomplete"), std::string::npos)
      << out.str();
  const std::string torn = dir_ + "/torn";
  ASSERT_EQ(std::system(("mkdir -p " + torn).c_str()), 0);
  std::ofstream(torn + "/metrics.jsonl") << "{\"event\":\"epoch\",\"epoch\":1,\"step\":10,\"test_acc\":0.5}\n"
                                         << "{\"event\":\"epoch\",\"epo";
  expect({{"report", torn, "--out", dir_ + "/report"},
          0,
          "pshard report: warning: " + torn + "/metrics.jsonl:2: the last line is cut short"});
}

// Files a user hands over that are no files: a FIFO would block a reader forever, /dev/zero would grow it without
// end. Every reader refuses them at once, naming the file; one torn trace file costs only its own process's row.
TEST_F(CliBadInput, FifosAndDevicesAreRefused) {
  const std::string fifo = dir_ + "/fifo.toml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string good_metrics = "{\"event\":\"epoch\",\"epoch\":1,\"step\":10,\"test_acc\":0.5}\n";
  auto run_dir = [&](const std::string& name) {
    const std::string d = dir_ + "/" + name;
    EXPECT_EQ(std::system(("mkdir -p " + d + "/trace").c_str()), 0);
    return d;
  };
  const std::string fifo_metrics = run_dir("fifo-metrics");
  ASSERT_EQ(::mkfifo((fifo_metrics + "/metrics.jsonl").c_str(), 0600), 0);
  const std::string zero_metrics = run_dir("zero-metrics");
  ASSERT_EQ(::symlink("/dev/zero", (zero_metrics + "/metrics.jsonl").c_str()), 0);
  const std::string fifo_config = run_dir("fifo-config");
  std::ofstream(fifo_config + "/metrics.jsonl") << good_metrics;
  ASSERT_EQ(::mkfifo((fifo_config + "/config.toml").c_str(), 0600), 0);
  const std::vector<Case> cases = {
      {{"train", "--config", fifo}, 1, "config " + fifo + ": not a regular file (a FIFO): refusing to read it"},
      {{"config", "--check", "/dev/zero"},
       1,
       "config /dev/zero: not a regular file (a character device): refusing to read it"},
      {{"report", fifo_metrics, "--out", dir_ + "/r1"},
       1,
       "metrics file " + fifo_metrics + "/metrics.jsonl: not a regular file (a FIFO): refusing to read it"},
      {{"report", zero_metrics, "--out", dir_ + "/r2"},
       1,
       "metrics file " + zero_metrics + "/metrics.jsonl: not a regular file (a character device)"},
      {{"report", fifo_config, "--out", dir_ + "/r3"},
       1,
       "config " + fifo_config + "/config.toml: not a regular file (a FIFO)"},
  };
  for (const Case& c : cases) expect(c);

  const std::string torn = run_dir("torn-trace");
  std::ofstream(torn + "/metrics.jsonl") << good_metrics;
  std::ofstream(torn + "/trace/coordinator.json")
      << "{\"pshard_process\":\"coordinator\",\"traceEvents\":[{\"name\":\"step 1\",\"cat\":\"step\",\"ph\":\"X\","
         "\"pid\":0,\"tid\":0,\"ts\":10,\"dur\":5}]}\n";
  std::ofstream(torn + "/trace/worker-0.json") << "{\"pshard_process\":\"worker 0\",\"traceEvents\":[{\"name\":";
  ASSERT_EQ(::mkfifo((torn + "/trace/worker-1.json").c_str(), 0600), 0);
  expect({{"report", torn, "--out", dir_ + "/r4"}, 0, "pshard report: warning: " + torn + "/trace/worker-0.json"});
  expect({{"report", torn, "--out", dir_ + "/r5"},
          0,
          "pshard report: warning: trace file " + torn + "/trace/worker-1.json: not a regular file (a FIFO)"});
  std::ifstream merged(dir_ + "/r5/trace.json");
  std::stringstream text;
  text << merged.rdbuf();
  EXPECT_NE(text.str().find("\"coordinator\""), std::string::npos) << text.str();
}

// `pshard join RUN_DIR` runs the command line in RUN_DIR/join.json as the caller: a file that another user could have
// written is refused, naming it and its mode, and nothing of it runs.
TEST_F(CliBadInput, JoinFilesOthersCouldWriteAreNotRun) {
  const std::string run = dir_ + "/elastic-run";
  ASSERT_EQ(std::system(("mkdir -p " + run).c_str()), 0);
  const std::string marker = dir_ + "/join-ran";
  const std::string join = run + "/join.json";
  std::ofstream(join) << "{\"argv\": [\"/bin/sh\", \"-c\", \"touch " + marker + "\"], \"env\": []}\n";
  ASSERT_EQ(::chmod(join.c_str(), 0666), 0);
  expect({{"join", run}, 1, "join file " + join + " has mode 0666: group or others may read or change it"});
  ASSERT_EQ(::chmod(join.c_str(), 0600), 0);
  ASSERT_EQ(::chmod(run.c_str(), 0777), 0);
  expect({{"join", run}, 1, "its directory " + run + " has mode 0777: anyone can replace the file in it"});
  ASSERT_EQ(::chmod(run.c_str(), 0755), 0);
  const std::string other = run + "/other.json";
  ASSERT_EQ(::rename(join.c_str(), other.c_str()), 0);
  ASSERT_EQ(::symlink(other.c_str(), join.c_str()), 0);
  expect({{"join", run}, 1, "join file " + join + " is a symbolic link"});
  // A join file the launch left behind when it was killed: its coordinator no longer listens.
  ASSERT_EQ(::unlink(join.c_str()), 0);
  const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr*>(&a), len), 0);
  ASSERT_EQ(::getsockname(probe, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string coordinator = "tcp://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  ::close(probe);  // nothing listens there now
  std::ofstream(join) << "{\"argv\": [\"/bin/sh\", \"-c\", \"touch " + marker +
                             "\"], \"env\": [], \"coordinator\": \"" + coordinator + "\", \"job_token\": \"t\"}\n";
  ASSERT_EQ(::chmod(join.c_str(), 0600), 0);
  expect({{"join", run},
          1,
          "pshard join: error: the job of " + run + " is not running: its coordinator (" + coordinator +
              ") does not answer"});
  EXPECT_NE(::access(marker.c_str(), F_OK), 0) << "a refused join file's command ran";
}

// README's own sync config (a cosine schedule without lr_schedule.total_steps) as an elastic job: refused before any
// process starts, naming the key.
TEST_F(CliBadInput, ElasticJobWithACosineScheduleOfUnknownLength) {
  expect({{"launch", "--servers", "1", "--workers", "2:3", "--config", source_dir() + "/configs/fmnist_mlp_sync.toml",
           "--run-dir", dir_ + "/elastic-cosine"},
          1,
          "key 'lr_schedule.total_steps': 0 (the run's length) with a cosine schedule in an elastic job"});
}

TEST_F(CliBadInput, ConfigsAndOverrides) {
  const std::string cfg = source_dir() + "/configs/linreg_sgd.toml";
  // model.name's choices are the model zoo's names, checked when the config is read (launch: before any process).
  const std::string bad_model = "key 'model.name': 'resnet21' is not one of " + models::join_model_names("|");
  const std::vector<Case> cases = {
      {{"train", "--config", dir_ + "/missing.toml"},
       1,
       "config " + dir_ + "/missing.toml: cannot open: No such file or directory"},
      {{"train", "--config", dir_ + "/syntax.toml"}, 1, "syntax.toml: line 2"},
      {{"train", "--config", cfg, "--set", "foo.bar=1"}, 1, "key 'foo.bar': unknown key"},
      {{"train", "--config", cfg, "--set", "train.epochs=abc"},
       1,
       "key 'train.epochs': expected an integer, got 'abc'"},
      {{"train", "--config", cfg, "--set", "train.batch_size=0"}, 1, "key 'train.batch_size': value 0 is out of range"},
      {{"train", "--config", cfg, "--set", "optimizer.name=adamx"}, 1, "key 'optimizer.name': 'adamx' is not one of"},
      {{"train", "--config", cfg, "--set", "model.name=resnet21"}, 1, bad_model},
      {{"launch", "--servers", "1", "--workers", "1", "--config", cfg, "--set", "model.name=resnet21"}, 1, bad_model},
      {{"train", "--config", cfg, "--set", "data.train_size=10"}, 1, "fewer than one global batch"},
  };
  for (const Case& c : cases) expect(c);
}

TEST_F(CliBadInput, DataFiles) {
  const std::string fmnist = source_dir() + "/configs/fmnist_mlp.toml";
  // A folder without the IDX files, then IDX files cut short.
  expect({{"train", "--config", fmnist, "--set", "data.dir=" + dir_}, 1, "neither train-images-idx3-ubyte"});
  const std::string d = dir_ + "/short";
  ASSERT_EQ(std::system(("mkdir -p " + d).c_str()), 0);
  for (const char* name :
       {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}) {
    // A valid header announcing 60000 28x28 images (or labels), followed by 10 bytes.
    std::ofstream f(d + "/" + name, std::ios::binary);
    const bool images = std::string(name).find("images") != std::string::npos;
    const unsigned char header_images[] = {0, 0, 8, 3, 0, 0, 0xEA, 0x60, 0, 0, 0, 28, 0, 0, 0, 28};
    const unsigned char header_labels[] = {0, 0, 8, 1, 0, 0, 0xEA, 0x60};
    if (images) {
      f.write(reinterpret_cast<const char*>(header_images), sizeof header_images);
    } else {
      f.write(reinterpret_cast<const char*>(header_labels), sizeof header_labels);
    }
    f.write("0123456789", 10);
  }
  expect({{"train", "--config", fmnist, "--set", "data.dir=" + d}, 1, "train-images-idx3-ubyte"});
  expect({{"train", "--config", fmnist, "--set", "data.dir=" + d}, 1, "truncated"});
}

TEST_F(CliBadInput, ClusterEnvironment) {
  const std::string cfg = source_dir() + "/configs/linreg_sgd.toml";
  // `pshard slurm` outside an allocation, and a worker given a coordinator address that is not one.
  ::unsetenv("SLURM_JOB_ID");
  expect({{"slurm", "--config", cfg}, 1, "environment variable SLURM_JOB_ID is not set"});
  expect({{"worker", "--coordinator", "nonsense", "--config", cfg}, 1, "cannot connect to coordinator 'nonsense'"});
  // Inside an allocation, an interface without an IPv4 address lists the interfaces that have one.
  const std::vector<std::pair<const char*, const char*>> slurm_env = {{"SLURM_JOB_ID", "1"},
                                                                      {"SLURM_PROCID", "0"},
                                                                      {"SLURM_NTASKS", "2"},
                                                                      {"SLURM_NODEID", "0"},
                                                                      {"SLURM_LOCALID", "0"},
                                                                      {"SLURM_NNODES", "1"},
                                                                      {"SLURM_JOB_NODELIST", "localhost"},
                                                                      {"SLURM_TASKS_PER_NODE", "2"}};
  for (const auto& [k, v] : slurm_env) ::setenv(k, v, 1);
  expect({{"slurm", "--config", cfg, "--iface", "nosuch0"}, 1, "--iface nosuch0: no IPv4 address on that interface"});
  for (const auto& kv : slurm_env) ::unsetenv(kv.first);
  // A rank that is not a number is refused, not read as rank 0.
  ::setenv("PSHARD_RANK", "abc", 1);
  for (const char* role : {"server", "worker"}) {
    expect({{role, "--coordinator", "tcp://127.0.0.1:1", "--config", cfg},
            1,
            "environment variable PSHARD_RANK must be a non-negative integer, got 'abc'"});
  }
  ::unsetenv("PSHARD_RANK");
}

}  // namespace
}  // namespace pshard
