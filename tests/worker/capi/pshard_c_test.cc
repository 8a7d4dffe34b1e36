// The C API (worker/capi/pshard_c.h) against a real coordinator and servers on 127.0.0.1: every call, every status.
// Workers are threads of this test, each with its own pshard_client, finding the job in the PSHARD_* variables that
// JobPlan::user_env gives a `pshard launch -- CMD` worker (ranks assigned by the coordinator in arrival order).
#include "worker/capi/pshard_c.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "common/util/child_process.h"
#include "common/util/host.h"
#include "common/util/json.h"
#include "launcher/job_plan.h"
#include "launcher/local_job.h"
#include "tests/support/run_helpers.h"

namespace pshard {
namespace {

const char* kConfig =
    "[optimizer]\nname = \"sgd\"\nlr = 0.5\nmomentum = 0.0\n\n[train]\nbatch_size = 4\nepochs = 1\nlog_every = 1\n\n"
    "[cluster]\nmode = \"sync\"\nslice_bytes = 64\nheartbeat_interval_ms = 100\nheartbeat_timeout_ms = 2000\n"
    "request_timeout_ms = 10000\nrendezvous_timeout_ms = 20000\n";

const std::vector<std::string> kJobVariables = {
    "PSHARD_COORDINATOR", "PSHARD_CONFIG", "PSHARD_SET",  "PSHARD_RUN_DIR", "PSHARD_NUM_WORKERS", "PSHARD_LOCAL_RANK",
    "PSHARD_JOB_TOKEN",   "PSHARD_RUN_ID", "PSHARD_RANK", "PSHARD_KEY_DIR", "PSHARD_START_STEP"};

void clear_job_variables() {
  for (const std::string& v : kJobVariables) ::unsetenv(v.c_str());
}

// A coordinator and S servers (real `pshard` processes); the environment of a `-- CMD` worker is set for this process.
class Job {
 public:
  // `mode`: cluster.mode; `extra_config`: more keys of [cluster], then further tables.
  Job(int servers, int workers, const std::string& extra_config = "", const std::string& mode = "sync") {
    static int jobs = 0;
    dir_ = testing::fresh_dir("capi-" + std::to_string(jobs++));
    std::string config = kConfig;
    config.replace(config.find("mode = \"sync\""), std::string("mode = \"sync\"").size(), "mode = \"" + mode + "\"");
    std::ofstream(dir_ + "/job.toml") << config << extra_config;
    plan_.executable = testing::pshard_bin();
    plan_.config_path = dir_ + "/job.toml";
    plan_.run_dir = dir_;
    plan_.job_token = new_job_token();
    plan_.num_servers = static_cast<uint32_t>(servers);
    plan_.num_workers = static_cast<uint32_t>(workers);
    const std::vector<int> ports = pick_free_ports(servers + 1);
    plan_.coordinator = "tcp://127.0.0.1:" + std::to_string(ports[0]);
    LocalJob::Options o;
    o.grace = std::chrono::milliseconds(2000);
    o.timeout = std::chrono::milliseconds(60000);
    job_ = std::make_unique<LocalJob>(o);
    job_->add(plan_.coordinator_process(plan_.coordinator));
    for (int s = 0; s < servers; ++s) {
      job_->add(plan_.server_process(s, "tcp://127.0.0.1:" + std::to_string(ports[static_cast<size_t>(s) + 1])));
    }
    job_->start();
    clear_job_variables();
    for (const std::string& e : plan_.user_env(-1, 0)) {
      const size_t eq = e.find('=');
      ::setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
    }
  }
  ~Job() {
    clear_job_variables();
    job_->stop("test over");
    job_->wait_for(std::chrono::seconds(10));
    testing::remove_dir_if_passed(dir_);
  }
  const std::string& dir() const { return dir_; }
  LocalJob& processes() { return *job_; }
  // The command line of pshard's own worker for this job, with `extra` arguments (its environment is this
  // process's, which the constructor set).
  std::vector<std::string> worker_argv(const std::vector<std::string>& extra) const {
    return plan_.worker_process(-1, extra).argv;
  }
  // The job ends by itself once every worker left: true when it did within `limit`.
  bool finished(std::chrono::seconds limit) { return job_->wait_for(limit).has_value(); }

 private:
  std::string dir_;
  JobPlan plan_;
  std::unique_ptr<LocalJob> job_;
};

// Runs `body` on `workers` threads, each with a connected client that it closes with the body's exit status.
void run_workers(int workers, const std::function<int(pshard_client*)>& body) {
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      pshard_client* c = nullptr;
      ASSERT_EQ(pshard_connect(&c), PSHARD_OK) << pshard_last_error();
      const int status = body(c);
      EXPECT_EQ(pshard_close(c, status, status == 0 ? nullptr : "the test's worker failed"), PSHARD_OK);
    });
  }
  for (std::thread& t : threads) t.join();
}

std::vector<Json> metrics_events(const std::string& run_dir) {
  std::vector<Json> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(Json::parse(line, "metrics.jsonl"));
  return out;
}

const int64_t kShapeW[2] = {3, 5};  // 15 floats: one 64-byte slice holds 16
const int64_t kShapeB[1] = {20};    // two slices, spread over the servers

TEST(CApi, StatusNamesAndErrorsWithoutAJob) {
  EXPECT_STREQ(pshard_status_name(PSHARD_OK), "PSHARD_OK");
  EXPECT_STREQ(pshard_status_name(PSHARD_PENDING), "PSHARD_PENDING");
  EXPECT_STREQ(pshard_status_name(PSHARD_ERR_ARGUMENT), "PSHARD_ERR_ARGUMENT");
  EXPECT_STREQ(pshard_status_name(PSHARD_ERR_ENVIRONMENT), "PSHARD_ERR_ENVIRONMENT");
  EXPECT_STREQ(pshard_status_name(PSHARD_ERR_CONFIG), "PSHARD_ERR_CONFIG");
  EXPECT_STREQ(pshard_status_name(PSHARD_ERR_CONNECT), "PSHARD_ERR_CONNECT");
  EXPECT_STREQ(pshard_status_name(PSHARD_ERR_STATE), "PSHARD_ERR_STATE");
  EXPECT_STREQ(pshard_status_name(PSHARD_ERR_SERVER), "PSHARD_ERR_SERVER");
  EXPECT_STREQ(pshard_status_name(PSHARD_ERR_TIMEOUT), "PSHARD_ERR_TIMEOUT");
  EXPECT_STREQ(pshard_status_name(PSHARD_ERR_ABORTED), "PSHARD_ERR_ABORTED");
  EXPECT_STREQ(pshard_status_name(PSHARD_ERR_INTERNAL), "PSHARD_ERR_INTERNAL");
  EXPECT_STREQ(pshard_status_name(42), "PSHARD_UNKNOWN_STATUS");

  EXPECT_EQ(pshard_connect(nullptr), PSHARD_ERR_ARGUMENT);
  EXPECT_NE(std::string(pshard_last_error()).find("out is NULL"), std::string::npos) << pshard_last_error();
  EXPECT_EQ(pshard_close(nullptr, 0, nullptr), PSHARD_OK);
  EXPECT_EQ(pshard_rank(nullptr), PSHARD_ERR_ARGUMENT);
  EXPECT_EQ(pshard_size(nullptr), PSHARD_ERR_ARGUMENT);
  EXPECT_EQ(pshard_local_rank(nullptr), PSHARD_ERR_ARGUMENT);

  // Not started by pshard launch: the variable that is missing, and how to start the program.
  clear_job_variables();
  pshard_client* c = reinterpret_cast<pshard_client*>(1);
  EXPECT_EQ(pshard_connect(&c), PSHARD_ERR_ENVIRONMENT);
  EXPECT_EQ(c, nullptr);
  EXPECT_NE(std::string(pshard_last_error()).find("PSHARD_COORDINATOR is not set"), std::string::npos);
  EXPECT_NE(std::string(pshard_last_error()).find("pshard launch"), std::string::npos);
  ::setenv("PSHARD_COORDINATOR", "tcp://127.0.0.1:1", 1);
  EXPECT_EQ(pshard_connect(&c), PSHARD_ERR_ENVIRONMENT);
  EXPECT_NE(std::string(pshard_last_error()).find("PSHARD_CONFIG is not set"), std::string::npos);

  const std::string dir = testing::fresh_dir("capi-env");
  ::setenv("PSHARD_CONFIG", (dir + "/missing.toml").c_str(), 1);
  EXPECT_EQ(pshard_connect(&c), PSHARD_ERR_CONFIG);
  EXPECT_NE(std::string(pshard_last_error()).find("missing.toml"), std::string::npos) << pshard_last_error();

  std::ofstream(dir + "/job.toml") << kConfig;
  ::setenv("PSHARD_CONFIG", (dir + "/job.toml").c_str(), 1);
  ::setenv("PSHARD_SET", "optimizer.lr=-1\n", 1);
  EXPECT_EQ(pshard_connect(&c), PSHARD_ERR_CONFIG);
  EXPECT_NE(std::string(pshard_last_error()).find("optimizer.lr"), std::string::npos) << pshard_last_error();

  ::setenv("PSHARD_SET", "cluster.rendezvous_timeout_ms=300\n", 1);
  ::setenv("PSHARD_RANK", "abc", 1);
  EXPECT_EQ(pshard_connect(&c), PSHARD_ERR_ENVIRONMENT);
  EXPECT_NE(std::string(pshard_last_error()).find("PSHARD_RANK"), std::string::npos) << pshard_last_error();

  // Nobody listens at the coordinator's address: the rendezvous times out.
  ::setenv("PSHARD_RANK", "0", 1);
  ::setenv("PSHARD_COORDINATOR", ("tcp://127.0.0.1:" + std::to_string(pick_free_ports(1)[0])).c_str(), 1);
  EXPECT_EQ(pshard_connect(&c), PSHARD_ERR_CONNECT);
  EXPECT_NE(std::string(pshard_last_error()), "");
  clear_job_variables();
  testing::remove_dir_if_passed(dir);
}

TEST(CApi, TwoWorkersTrainOneSyncStepAndReportMetrics) {
  Job job(2, 2);
  std::vector<float> w0(15), b0(20);
  for (size_t i = 0; i < w0.size(); ++i) w0[i] = 0.1f * static_cast<float>(i);
  for (size_t i = 0; i < b0.size(); ++i) b0[i] = 1.0f - 0.05f * static_cast<float>(i);
  // The gradient of rank r: (r + 1) * 0.01 * (i + 1); BSP applies the mean, 0.015 * (i + 1), with lr 0.5.
  auto grad = [](int rank, size_t n) {
    std::vector<float> g(n);
    for (size_t i = 0; i < n; ++i) g[i] = static_cast<float>(rank + 1) * 0.01f * static_cast<float>(i + 1);
    return g;
  };
  run_workers(2, [&](pshard_client* c) {
    const int rank = pshard_rank(c);
    EXPECT_TRUE(rank == 0 || rank == 1) << rank;
    EXPECT_EQ(pshard_size(c), 2);
    EXPECT_EQ(pshard_local_rank(c), 0);

    char buf[64];
    EXPECT_EQ(pshard_config_get(c, "optimizer.name", buf, sizeof buf), 3);
    EXPECT_STREQ(buf, "sgd");
    EXPECT_EQ(pshard_config_get(c, "train.batch_size", buf, sizeof buf), 1);
    EXPECT_STREQ(buf, "4");
    EXPECT_EQ(pshard_config_get(c, "optimizer.lr", buf, sizeof buf), 3);
    EXPECT_STREQ(buf, "0.5");
    EXPECT_EQ(pshard_config_get(c, "cluster.mode", buf, 3), 4);  // cut: "sy" + NUL, the full length returned
    EXPECT_STREQ(buf, "sy");
    EXPECT_EQ(pshard_config_get(c, "train.nonsense", buf, sizeof buf), PSHARD_ERR_ARGUMENT);
    EXPECT_NE(std::string(pshard_last_error()).find("train.nonsense"), std::string::npos);

    const int w = pshard_add_tensor(c, "fc.weight", 2, kShapeW, PSHARD_FLOAT32);
    const int b = pshard_add_tensor(c, "fc.bias", 1, kShapeB, PSHARD_FLOAT32);
    EXPECT_EQ(w, 0);
    EXPECT_EQ(b, 1);
    EXPECT_EQ(pshard_start(c, "capi-test", 4, 2), PSHARD_OK) << pshard_last_error();
    std::vector<float> wv = rank == 0 ? w0 : std::vector<float>(15, -9.0f);
    std::vector<float> bv = rank == 0 ? b0 : std::vector<float>(20, -9.0f);
    pshard_request r = 0;
    if (rank == 0) {
      EXPECT_EQ(pshard_init_tensor(c, w, wv.data(), &r), PSHARD_OK);
      EXPECT_EQ(pshard_wait(c, r, 10000), PSHARD_OK) << pshard_last_error();
      EXPECT_EQ(pshard_init_tensor(c, b, bv.data(), &r), PSHARD_OK);
      EXPECT_EQ(pshard_wait(c, r, -1), PSHARD_OK) << pshard_last_error();
    } else {
      int initialiser = -1;
      EXPECT_EQ(pshard_initialiser(c, &initialiser), PSHARD_OK);
      EXPECT_EQ(initialiser, 0);  // rank 0 is alive
      EXPECT_EQ(pshard_init_tensor(c, w, wv.data(), &r), PSHARD_ERR_STATE);
      EXPECT_NE(std::string(pshard_last_error())
                    .find("rank 0 sends the initial weights (this is rank 1, and a lower "
                          "rank is alive)"),
                std::string::npos)
          << pshard_last_error();
    }
    // Everyone, rank 0 included, starts from the servers' copy.
    pshard_request rw = 0, rb = 0;
    EXPECT_EQ(pshard_pull(c, w, wv.data(), 0, &rw), PSHARD_OK);
    EXPECT_EQ(pshard_pull(c, b, bv.data(), 0, &rb), PSHARD_OK);
    EXPECT_EQ(pshard_wait(c, rw, 10000), PSHARD_OK) << pshard_last_error();
    EXPECT_EQ(pshard_wait(c, rb, 10000), PSHARD_OK) << pshard_last_error();
    EXPECT_EQ(wv, w0);
    EXPECT_EQ(bv, b0);
    EXPECT_EQ(pshard_wait(c, rw, 10), PSHARD_ERR_ARGUMENT);  // already reported done
    EXPECT_EQ(pshard_poll(c, 987654), PSHARD_ERR_ARGUMENT);

    // Step 0's gradients in, step 1's weights out; polled to completion.
    const std::vector<float> gw = grad(rank, 15), gb = grad(rank, 20);
    EXPECT_EQ(pshard_push_pull(c, w, gw.data(), wv.data(), 0, &rw), PSHARD_OK);
    EXPECT_EQ(pshard_push_pull(c, b, gb.data(), bv.data(), 0, &rb), PSHARD_OK);
    int sw = PSHARD_PENDING;
    for (int i = 0; i < 2000 && sw == PSHARD_PENDING; ++i) {
      sw = pshard_poll(c, rw);
      if (sw == PSHARD_PENDING) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(sw, PSHARD_OK) << pshard_last_error();
    EXPECT_EQ(pshard_wait(c, rb, -1), PSHARD_OK) << pshard_last_error();
    for (size_t i = 0; i < 15; ++i) EXPECT_FLOAT_EQ(wv[i], w0[i] - 0.5f * 0.015f * static_cast<float>(i + 1)) << i;
    for (size_t i = 0; i < 20; ++i) EXPECT_FLOAT_EQ(bv[i], b0[i] - 0.5f * 0.015f * static_cast<float>(i + 1)) << i;

    // Step 5's weights do not exist yet: the wait's deadline passes, the request stays valid.
    std::vector<float> future(15);
    pshard_request rf = 0;
    EXPECT_EQ(pshard_pull(c, w, future.data(), 5, &rf), PSHARD_OK);
    EXPECT_EQ(pshard_poll(c, rf), PSHARD_PENDING);
    EXPECT_EQ(pshard_wait(c, rf, 100), PSHARD_ERR_TIMEOUT);
    EXPECT_NE(std::string(pshard_last_error()).find("not done after 100 ms"), std::string::npos);
    EXPECT_EQ(pshard_poll(c, rf), PSHARD_PENDING);

    EXPECT_EQ(pshard_report_step(c, 1, 0, 2.5), PSHARD_OK);
    EXPECT_EQ(pshard_report_step(c, 0, 0, 2.5), PSHARD_ERR_ARGUMENT);
    EXPECT_EQ(pshard_barrier(c, "reported", 20000), PSHARD_OK) << pshard_last_error();
    // A vote: nobody raises the flag, then only rank 1 does; both ranks get the same answer each round.
    int any_vote = -1;
    EXPECT_EQ(pshard_barrier_vote(c, "vote", 0, &any_vote, 20000), PSHARD_OK) << pshard_last_error();
    EXPECT_EQ(any_vote, 0);
    EXPECT_EQ(pshard_barrier_vote(c, "vote", rank == 1, &any_vote, 20000), PSHARD_OK) << pshard_last_error();
    EXPECT_EQ(any_vote, 1);
    EXPECT_EQ(pshard_barrier_vote(c, "vote", 0, nullptr, 10), PSHARD_ERR_ARGUMENT);
    pshard_epoch_report e{};
    e.epoch = 1;
    e.label = 1;
    e.step = 1;
    e.samples = 4;
    e.loss_sum = 4.0 * (rank + 1);
    e.correct = 1 + rank;
    e.test_samples = 10;
    e.test_loss_sum = 5.0;
    e.test_correct = 5 + rank;
    e.epoch_s = 30.0;  // longer than this test's waits so far (under TSan they take ~0.5 s): other_s is the rest
    e.data_s = 0.05;
    e.forward_s = 0.1;
    e.backward_s = -1;  // not measured
    e.figures = PSHARD_TRAIN_LOSS | PSHARD_TRAIN_ACC | PSHARD_TEST_LOSS | PSHARD_TEST_ACC;
    EXPECT_EQ(pshard_report_epoch(c, &e), PSHARD_OK);
    e.epoch = 1;  // not after this worker's last report
    e.label = 2;
    EXPECT_EQ(pshard_report_epoch(c, &e), PSHARD_ERR_ARGUMENT);
    EXPECT_NE(std::string(pshard_last_error()).find("an epoch after this worker's last (1)"), std::string::npos)
        << pshard_last_error();
    e.epoch = 2;  // beyond train.epochs = 1 is the program's choice, but its number must increase too
    e.label = 1;
    EXPECT_EQ(pshard_report_epoch(c, &e), PSHARD_ERR_ARGUMENT);
    EXPECT_NE(std::string(pshard_last_error()).find("epoch 1 reported after epoch 1"), std::string::npos)
        << pshard_last_error();
    e.label = 2;
    e.test_correct = 11;  // more hits than test samples
    EXPECT_EQ(pshard_report_epoch(c, &e), PSHARD_ERR_ARGUMENT);
    EXPECT_EQ(pshard_report_epoch(c, nullptr), PSHARD_ERR_ARGUMENT);
    // Both reports are in before anyone leaves (a leaving worker's epoch would be waited for no more).
    EXPECT_EQ(pshard_barrier(c, "epoch reported", 20000), PSHARD_OK) << pshard_last_error();
    return 0;
  });
  ASSERT_TRUE(job.finished(std::chrono::seconds(20))) << "the coordinator did not end the job after both left";
  const std::vector<Json> events = metrics_events(job.dir());
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0].at("event").as_string(), "start");
  EXPECT_EQ(events[0].at("model").as_string(), "capi-test");
  EXPECT_EQ(events[0].at("global_batch").as_int(), 8);
  EXPECT_EQ(events[0].at("steps_per_epoch").as_int(), 2);
  EXPECT_EQ(events[0].at("model_bytes").as_int(), 35 * 4);
  bool step_seen = false, epoch_seen = false;
  for (const Json& e : events) {
    const std::string kind = e.at("event").as_string();
    if (kind == "step") {
      step_seen = true;
      EXPECT_DOUBLE_EQ(e.at("loss").as_number(), 2.5);
      EXPECT_DOUBLE_EQ(e.at("lr").as_number(), 0.5);
    }
    if (kind == "epoch") {
      epoch_seen = true;
      EXPECT_DOUBLE_EQ(e.at("train_loss").as_number(), 12.0 / 8);  // (4 + 8) / 8 samples
      EXPECT_DOUBLE_EQ(e.at("train_acc").as_number(), 3.0 / 8);
      EXPECT_DOUBLE_EQ(e.at("test_acc").as_number(), 11.0 / 20);
      // The caller's phases, the library's waits, and the rest of epoch_s as other: they add up to epoch_s.
      EXPECT_DOUBLE_EQ(e.at("data_s").as_number(), 0.05);
      EXPECT_DOUBLE_EQ(e.at("forward_s").as_number(), 0.1);
      EXPECT_DOUBLE_EQ(e.at("backward_s").as_number(), 0.0);
      EXPECT_NEAR(e.at("data_s").as_number() + e.at("forward_s").as_number() + e.at("backward_s").as_number() +
                      e.at("comm_wait_s").as_number() + e.at("other_s").as_number(),
                  30.0, 1e-6);  // each field went through JSON with 9 significant digits
      // Init (rank 0), pulls and one push_pull, counted by the KV client as they went, through sockets or (a server
      // on this host, cluster.transport = auto) through shared memory (the pending pull's reply has not arrived: it
      // is not counted). The init always goes through a socket.
      EXPECT_DOUBLE_EQ(e.at("bytes_sent").as_number() + e.at("shm_bytes_sent").as_number(), (35 + 2 * 35) * 4.0);
      EXPECT_DOUBLE_EQ(e.at("bytes_recv").as_number() + e.at("shm_bytes_recv").as_number(), (2 * 35 + 2 * 35) * 4.0);
      EXPECT_GE(e.at("bytes_sent").as_number(), 35 * 4.0);
      EXPECT_DOUBLE_EQ(e.at("fp32_bytes_recv").as_number(), (2 * 35 + 2 * 35) * 4.0);
    }
  }
  EXPECT_TRUE(step_seen);
  EXPECT_TRUE(epoch_seen);
}

// Loss scaling through the C API: both workers say before pshard_start that they scale their loss; rank 1's gradients
// of step 0 overflowed, so its push asks to skip the step. Both workers' replies say skipped and bring the weights the
// step began with; the step's second try applies the mean. Out of order: pshard_scale_loss after pshard_start, a
// null `skipped`, a step below -1.
TEST(CApi, AStepOneWorkerAsksToSkipIsSkippedForBothByTheServers) {
  Job job(2, 2);
  run_workers(2, [&](pshard_client* c) {
    const int rank = pshard_rank(c);
    const int w = pshard_add_tensor(c, "fc.weight", 2, kShapeW, PSHARD_FLOAT32);
    EXPECT_EQ(pshard_scale_loss(c), PSHARD_OK) << pshard_last_error();
    EXPECT_EQ(pshard_start(c, "capi-skip", 4, 0), PSHARD_OK) << pshard_last_error();
    EXPECT_EQ(pshard_scale_loss(c), PSHARD_ERR_STATE);
    std::vector<float> wv(15, 1.0f);
    pshard_request r = 0;
    if (rank == 0) {
      EXPECT_EQ(pshard_init_tensor(c, w, wv.data(), &r), PSHARD_OK);
      EXPECT_EQ(pshard_wait(c, r, 10000), PSHARD_OK) << pshard_last_error();
    }
    EXPECT_EQ(pshard_pull(c, w, wv.data(), 0, &r), PSHARD_OK);
    EXPECT_EQ(pshard_wait(c, r, 10000), PSHARD_OK) << pshard_last_error();
    std::vector<float> g(15, rank == 0 ? 0.2f : 0.6f);
    if (rank == 1) {
      g[3] = std::numeric_limits<float>::infinity();
      EXPECT_EQ(pshard_request_skip(c, 0), PSHARD_OK) << pshard_last_error();
    }
    int skipped = -1;
    EXPECT_EQ(pshard_push_pull(c, w, g.data(), wv.data(), 0, &r), PSHARD_OK);
    EXPECT_EQ(pshard_wait_skipped(c, r, 10000, &skipped), PSHARD_OK) << pshard_last_error();
    EXPECT_EQ(skipped, 1);
    EXPECT_EQ(wv, std::vector<float>(15, 1.0f));
    EXPECT_EQ(pshard_request_skip(c, -1), PSHARD_OK) << pshard_last_error();
    g[3] = g[0];
    EXPECT_EQ(pshard_push_pull(c, w, g.data(), wv.data(), 0, &r), PSHARD_OK);
    EXPECT_EQ(pshard_wait_skipped(c, r, 10000, nullptr), PSHARD_ERR_ARGUMENT);
    EXPECT_EQ(pshard_wait_skipped(c, r, 10000, &skipped), PSHARD_OK) << pshard_last_error();
    EXPECT_EQ(skipped, 0);
    for (float v : wv) EXPECT_FLOAT_EQ(v, 1.0f - 0.5f * 0.4f);  // lr 0.5 x the mean of 0.2 and 0.6
    EXPECT_EQ(pshard_request_skip(c, -2), PSHARD_ERR_ARGUMENT);
    return 0;
  });
  ASSERT_TRUE(job.finished(std::chrono::seconds(20))) << "the coordinator did not end the job after both left";
}

// cluster.batch_assignment = dynamic hands the epoch's batches to pshard's own workers; a program's batches are its
// data loader's, so its start is refused, naming the key.
TEST(CApi, DynamicBatchAssignmentIsRefusedNamingTheKey) {
  Job job(1, 1, "batch_assignment = \"dynamic\"\n", "async");
  run_workers(1, [&](pshard_client* c) {
    EXPECT_EQ(pshard_add_tensor(c, "w", 2, kShapeW, PSHARD_FLOAT32), 0);
    EXPECT_EQ(pshard_start(c, "m", 4, 10), PSHARD_ERR_CONFIG);
    EXPECT_NE(std::string(pshard_last_error()).find("cluster.batch_assignment = dynamic is for pshard's own workers"),
              std::string::npos)
        << pshard_last_error();
    return 0;
  });
}

TEST(CApi, CallsOutOfOrderAndBadArgumentsAreRefused) {
  Job job(1, 1, "\n[lr_schedule]\nname = \"cosine\"\n");
  run_workers(1, [&](pshard_client* c) {
    std::vector<float> v(15, 0.0f);
    pshard_request r = 0;
    EXPECT_EQ(pshard_pull(c, 0, v.data(), 0, &r), PSHARD_ERR_STATE);
    EXPECT_NE(std::string(pshard_last_error()).find("before moving tensors"), std::string::npos);
    EXPECT_EQ(pshard_wait(c, 1, 10), PSHARD_ERR_STATE);
    EXPECT_EQ(pshard_poll(c, 1), PSHARD_ERR_STATE);
    EXPECT_EQ(pshard_report_step(c, 1, 0, 1.0), PSHARD_ERR_STATE);
    pshard_epoch_report e{};
    e.epoch = 1;
    EXPECT_EQ(pshard_report_epoch(c, &e), PSHARD_ERR_STATE);
    EXPECT_EQ(pshard_start(c, "none", 4, 1), PSHARD_ERR_ARGUMENT);
    EXPECT_NE(std::string(pshard_last_error()).find("no trainable parameters"), std::string::npos);

    EXPECT_EQ(pshard_add_tensor(c, "", 2, kShapeW, PSHARD_FLOAT32), PSHARD_ERR_ARGUMENT);
    EXPECT_EQ(pshard_add_tensor(c, nullptr, 2, kShapeW, PSHARD_FLOAT32), PSHARD_ERR_ARGUMENT);
    EXPECT_EQ(pshard_add_tensor(c, "w", 2, kShapeW, 7), PSHARD_ERR_ARGUMENT);
    EXPECT_NE(std::string(pshard_last_error()).find("float32 only"), std::string::npos);
    EXPECT_EQ(pshard_add_tensor(c, "w", -1, kShapeW, PSHARD_FLOAT32), PSHARD_ERR_ARGUMENT);
    EXPECT_EQ(pshard_add_tensor(c, "w", 2, nullptr, PSHARD_FLOAT32), PSHARD_ERR_ARGUMENT);
    const int64_t zero[2] = {3, 0};
    EXPECT_EQ(pshard_add_tensor(c, "w", 2, zero, PSHARD_FLOAT32), PSHARD_ERR_ARGUMENT);
    EXPECT_NE(std::string(pshard_last_error()).find("dimension 1 is 0"), std::string::npos);
    EXPECT_EQ(pshard_add_tensor(c, "w", 2, kShapeW, PSHARD_FLOAT32), 0);
    EXPECT_EQ(pshard_add_tensor(c, "w", 2, kShapeW, PSHARD_FLOAT32), PSHARD_ERR_ARGUMENT);
    EXPECT_NE(std::string(pshard_last_error()).find("declared twice"), std::string::npos);

    EXPECT_EQ(pshard_start(c, "m", 0, 1), PSHARD_ERR_ARGUMENT);
    // A cosine schedule needs the run's length.
    EXPECT_EQ(pshard_start(c, "m", 4, 0), PSHARD_ERR_CONFIG);
    EXPECT_NE(std::string(pshard_last_error()).find("steps_per_epoch"), std::string::npos);
    EXPECT_EQ(pshard_start(c, "m", 4, 10), PSHARD_OK) << pshard_last_error();
    EXPECT_EQ(pshard_start(c, "m", 4, 10), PSHARD_ERR_STATE);
    EXPECT_EQ(pshard_add_tensor(c, "late", 2, kShapeW, PSHARD_FLOAT32), PSHARD_ERR_STATE);
    EXPECT_EQ(pshard_pull(c, 1, v.data(), 0, &r), PSHARD_ERR_ARGUMENT);
    EXPECT_EQ(pshard_pull(c, -1, v.data(), 0, &r), PSHARD_ERR_ARGUMENT);
    EXPECT_EQ(pshard_pull(c, 0, nullptr, 0, &r), PSHARD_ERR_ARGUMENT);
    EXPECT_EQ(pshard_pull(c, 0, v.data(), -1, &r), PSHARD_ERR_ARGUMENT);
    EXPECT_EQ(pshard_pull(c, 0, v.data(), 0, nullptr), PSHARD_ERR_ARGUMENT);
    EXPECT_EQ(pshard_push_pull(c, 0, nullptr, v.data(), 0, &r), PSHARD_ERR_ARGUMENT);
    EXPECT_EQ(pshard_push_pull(c, 0, v.data(), v.data(), -3, &r), PSHARD_ERR_ARGUMENT);
    EXPECT_EQ(pshard_init_tensor(c, 0, nullptr, &r), PSHARD_ERR_ARGUMENT);
    EXPECT_EQ(pshard_barrier(c, nullptr, 10), PSHARD_ERR_ARGUMENT);
    EXPECT_EQ(pshard_config_get(c, nullptr, nullptr, 0), PSHARD_ERR_ARGUMENT);
    // A pull before any init: the servers hold no weights; the request timeout (10 s) is not waited for here.
    EXPECT_EQ(pshard_pull(c, 0, v.data(), 0, &r), PSHARD_OK);
    EXPECT_EQ(pshard_wait(c, r, 50), PSHARD_ERR_TIMEOUT);
    EXPECT_EQ(pshard_barrier(c, "alone", 5000), PSHARD_OK) << pshard_last_error();
    return 0;
  });
}

TEST(CApi, RanksWithDifferentTensorShapesGetAServerError) {
  Job job(1, 2);
  run_workers(2, [&](pshard_client* c) {
    const int rank = pshard_rank(c);
    const int64_t transposed[2] = {5, 3};  // the same 15 floats, another shape
    EXPECT_EQ(pshard_add_tensor(c, "fc.weight", 2, rank == 0 ? kShapeW : transposed, PSHARD_FLOAT32), 0);
    EXPECT_EQ(pshard_start(c, "m", 4, 1), PSHARD_OK) << pshard_last_error();
    std::vector<float> v(15, 1.0f);
    pshard_request r = 0;
    if (rank == 0) {
      EXPECT_EQ(pshard_init_tensor(c, 0, v.data(), &r), PSHARD_OK);
      EXPECT_EQ(pshard_wait(c, r, 10000), PSHARD_OK) << pshard_last_error();
    }
    EXPECT_EQ(pshard_barrier(c, "initialized", 20000), PSHARD_OK) << pshard_last_error();
    EXPECT_EQ(pshard_pull(c, 0, v.data(), 0, &r), PSHARD_OK);
    const int status = pshard_wait(c, r, 10000);
    if (rank == 0) {
      EXPECT_EQ(status, PSHARD_OK) << pshard_last_error();
    } else {
      EXPECT_EQ(status, PSHARD_ERR_SERVER);
      const std::string error = pshard_last_error();
      EXPECT_NE(
          error.find("the tensors of rank 1 (names, shapes, order) differ from rank 0's (the first difference: "
                     "tensor 0 is 'fc.weight[5,3]' here, 'fc.weight[3,5]' on rank 0; 1 tensors here, 1 on rank 0)"),
          std::string::npos)
          << error;
      EXPECT_NE(error.find("fingerprint"), std::string::npos) << error;
    }
    EXPECT_EQ(pshard_barrier(c, "pulled", 20000), PSHARD_OK) << pshard_last_error();
    return 0;
  });
}

TEST(CApi, AWorkerThatFailsAbortsTheOthersWait) {
  Job job(1, 2);
  run_workers(2, [&](pshard_client* c) {
    const int rank = pshard_rank(c);
    EXPECT_EQ(pshard_add_tensor(c, "fc.weight", 2, kShapeW, PSHARD_FLOAT32), 0);
    EXPECT_EQ(pshard_start(c, "m", 4, 1), PSHARD_OK) << pshard_last_error();
    std::vector<float> v(15, 1.0f), g(15, 0.5f);
    pshard_request r = 0;
    if (rank == 0) {
      EXPECT_EQ(pshard_init_tensor(c, 0, v.data(), &r), PSHARD_OK);
      EXPECT_EQ(pshard_wait(c, r, 10000), PSHARD_OK) << pshard_last_error();
    }
    EXPECT_EQ(pshard_barrier(c, "initialized", 20000), PSHARD_OK) << pshard_last_error();
    if (rank == 1) return 3;  // leaves with a failure: cluster.failure_policy = abort ends the job
    // Step 0 waits for rank 1's push, which never comes: the abort ends the wait, not the request timeout.
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(pshard_push_pull(c, 0, g.data(), v.data(), 0, &r), PSHARD_OK);
    EXPECT_EQ(pshard_wait(c, r, -1), PSHARD_ERR_ABORTED);
    EXPECT_NE(std::string(pshard_last_error()).find("worker 1"), std::string::npos) << pshard_last_error();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(8));
    EXPECT_EQ(pshard_barrier(c, "after", 1000), PSHARD_ERR_ABORTED);
    return 1;
  });
}

TEST(CApi, ALostCoordinatorAbortsTheWait) {
  Job job(1, 1);
  run_workers(1, [&](pshard_client* c) {
    EXPECT_EQ(pshard_add_tensor(c, "fc.weight", 2, kShapeW, PSHARD_FLOAT32), 0);
    EXPECT_EQ(pshard_start(c, "m", 4, 1), PSHARD_OK) << pshard_last_error();
    std::vector<float> v(15, 1.0f);
    pshard_request r = 0;
    // A pull of a weight nobody initialized never completes; the coordinator goes silent meanwhile.
    EXPECT_EQ(pshard_pull(c, 0, v.data(), 3, &r), PSHARD_OK);
    const int64_t coordinator = job.processes().pids().at(0);
    EXPECT_EQ(::kill(static_cast<pid_t>(-coordinator), SIGKILL), 0);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(pshard_wait(c, r, -1), PSHARD_ERR_ABORTED);
    EXPECT_NE(std::string(pshard_last_error()).find("coordinator"), std::string::npos) << pshard_last_error();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(8));
    return 1;
  });
}

// The learning rate a program reports is the one the servers apply: both come from the job's policy (LrPolicy), whose
// global batch is the workers x train.batch_size (4 here), whatever batch the program trains with (16).
TEST(CApi, TheLearningRateReportedIsTheOneTheServersApply) {
  Job job(1, 1, "\n[lr_schedule]\nscaling = \"linear\"\nreference_batch = 8\n");
  run_workers(1, [&](pshard_client* c) {
    EXPECT_EQ(pshard_add_tensor(c, "w", 2, kShapeW, PSHARD_FLOAT32), 0);
    EXPECT_EQ(pshard_start(c, "m", 16, 1), PSHARD_OK) << pshard_last_error();
    std::vector<float> w(15, 1.0f), g(15, 1.0f);
    pshard_request r = 0;
    EXPECT_EQ(pshard_init_tensor(c, 0, w.data(), &r), PSHARD_OK);
    EXPECT_EQ(pshard_wait(c, r, 10000), PSHARD_OK) << pshard_last_error();
    EXPECT_EQ(pshard_push_pull(c, 0, g.data(), w.data(), 0, &r), PSHARD_OK);
    EXPECT_EQ(pshard_wait(c, r, 10000), PSHARD_OK) << pshard_last_error();
    EXPECT_FLOAT_EQ(w[0], 1.0f - 0.25f);  // 0.5 x (1 x 4) / 8
    EXPECT_EQ(pshard_report_step(c, 1, 0, 1.0), PSHARD_OK);
    return 0;
  });
  ASSERT_TRUE(job.finished(std::chrono::seconds(20)));
  int steps = 0;
  for (const Json& e : metrics_events(job.dir())) {
    if (e.at("event").as_string() != "step") continue;
    ++steps;
    EXPECT_DOUBLE_EQ(e.at("lr").as_number(), 0.25);
  }
  EXPECT_EQ(steps, 1);
}

// The start rules are the worker session's (worker/session/worker_session.h): both front ends refuse a resume past
// the run's end before anything reaches the servers, in the same words. The run: 40 samples, batch 4, one epoch.
TEST(BothFrontEnds, AResumePastTheRunsEndIsRefusedInTheSameWords) {
  const std::string run =
      "\n[data]\nname = \"synthetic-regression\"\nfeatures = 3\ntrain_size = 40\ntest_size = 8\n"
      "\n[model]\nname = \"linreg\"\n";
  const std::string refusal = "the run resumes at step 1000, past its end (10 steps)";
  {
    Job job(1, 1, run);
    ::setenv("PSHARD_START_STEP", "1000", 1);
    run_workers(1, [&](pshard_client* c) {
      EXPECT_EQ(pshard_add_tensor(c, "fc.weight", 2, kShapeW, PSHARD_FLOAT32), 0);
      EXPECT_EQ(pshard_start(c, "m", 4, 10), PSHARD_ERR_STATE);
      EXPECT_EQ(std::string(pshard_last_error()), "pshard: " + refusal);
      return 1;
    });
  }
  Job job(1, 1, run);
  const std::string log = job.dir() + "/worker.log";
  const ChildResult r = run_child(job.worker_argv({"--start-step", "1000"}), log, 60);
  std::ifstream in(log);
  const std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_FALSE(r.timed_out) << out;
  EXPECT_NE(r.exit_code, 0) << out;
  EXPECT_NE(out.find(refusal), std::string::npos) << out;
}

}  // namespace
}  // namespace pshard
