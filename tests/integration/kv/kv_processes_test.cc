// Real `pshard coordinator` and `pshard server` processes on 127.0.0.1, workers as threads with their own
// ClusterClient: BSP equals the single-process computation; a dead worker under `continue` and `abort`.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/control/cluster_client.h"
#include "common/error.h"
#include "common/util/child_process.h"
#include "launcher/local_job.h"
#include "optim/optimizer.h"
#include "tests/support/run_helpers.h"
#include "worker/client/kv_client.h"

namespace pshard {
namespace {

const std::vector<TensorSpec> kTensors = {{"fc1.weight", 37}, {"fc1.bias", 53}, {"fc2.weight", 7}};

// A coordinator and S servers as child processes; their output goes to a log file.
class ProcessJob {
 public:
  ProcessJob(int servers, int workers, const std::string& config_body) : workers_(workers) {
    dir_ = std::filesystem::temp_directory_path() /
           ("pshard-kv-it-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::create_directories(dir_);
    const std::string config = (dir_ / "job.toml").string();
    std::ofstream(config) << config_body;
    log_path_ = (dir_ / "job.log").string();
    log_fd_ = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    LocalJob::Options o;
    o.out_fd = log_fd_;
    o.err_fd = log_fd_;
    o.grace = std::chrono::milliseconds(2000);
    o.timeout = std::chrono::milliseconds(120000);
    job_ = std::make_unique<LocalJob>(o);
    const std::string exe = testing::pshard_bin();
    std::vector<int> ports = pick_free_ports(servers + 1);
    coordinator_ = "tcp://127.0.0.1:" + std::to_string(ports[0]);
    const std::vector<std::string> env = {"PSHARD_JOB_TOKEN=" + token_};
    job_->add({"coordinator",
               {exe, "coordinator", "--servers", std::to_string(servers), "--workers", std::to_string(workers),
                "--bind", coordinator_, "--config", config, "--run-dir", dir_.string()},
               env,
               false,
               true});
    for (int s = 0; s < servers; ++s) {
      job_->add({"server " + std::to_string(s),
                 {exe, "server", "--coordinator", coordinator_, "--config", config, "--run-dir", dir_.string(),
                  "--rank", std::to_string(s), "--bind", "tcp://127.0.0.1:" + std::to_string(ports[s + 1])},
                 env,
                 true,
                 false});
    }
    job_->start();
  }
  ~ProcessJob() {
    job_->stop("test over");
    job_->wait_for(std::chrono::seconds(10));
    ::close(log_fd_);
    std::filesystem::remove_all(dir_);
  }

  ClusterClient::Options worker(uint32_t rank) const {
    ClusterClient::Options o;
    o.coordinator = coordinator_;
    o.role = NodeRole::kWorker;
    o.requested_rank = rank;
    o.job_token = token_;
    o.layout_fingerprint = SliceLayout(kTensors, 64, 1).fingerprint();
    o.heartbeat_interval = std::chrono::milliseconds(100);
    o.heartbeat_timeout = std::chrono::milliseconds(2000);
    o.rendezvous_timeout = std::chrono::milliseconds(30000);
    return o;
  }
  static KvClientOptions client(const ClusterClient& c, uint32_t rank, const std::string& token) {
    KvClientOptions k;
    k.rank = rank;
    for (const NodeInfo& s : c.map().servers) k.servers.push_back(s.endpoint);
    k.tensors = kTensors;
    k.slice_bytes = 64;
    k.job_token = token;
    k.request_timeout = std::chrono::milliseconds(15000);
    return k;
  }
  const std::string& token() const { return token_; }
  std::optional<LocalJob::Result> wait_for(std::chrono::milliseconds t) { return job_->wait_for(t); }
  std::string log() const {
    std::ifstream f(log_path_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

 private:
  static inline int counter_ = 0;
  int workers_;
  std::filesystem::path dir_;
  std::string log_path_;
  int log_fd_ = -1;
  std::string coordinator_;
  std::string token_ = "it-token-" + std::to_string(::getpid());
  std::unique_ptr<LocalJob> job_;
};

std::string config(const std::string& mode, const std::string& optimizer, double lr, const std::string& policy) {
  std::ostringstream c;
  c << "[cluster]\nmode = \"" << mode << "\"\nslice_bytes = 64\nfailure_policy = \"" << policy
    << "\"\nheartbeat_interval_ms = 100\nheartbeat_timeout_ms = 2000\nserver_threads = 2\n"
    << "[optimizer]\nname = \"" << optimizer << "\"\nlr = " << lr << "\n";
  return c.str();
}

float grad_value(uint32_t rank, int64_t step, size_t t, size_t i) {
  return std::cos(0.29f * static_cast<float>(i) + 0.7f * static_cast<float>(step) + static_cast<float>(t)) *
         (1.0f + static_cast<float>(rank));
}
float init_value(size_t t, size_t i) { return 0.02f * static_cast<float>((i * 5 + t) % 17) - 0.15f; }

TEST(KvProcesses, BspWithThreeWorkersTwoServerProcessesEqualsSingleProcess) {
  const uint32_t W = 3;
  const int64_t K = 4;
  ProcessJob job(2, W, config("sync", "adam", 0.05, "abort"));
  std::vector<std::vector<std::vector<float>>> weights(W);
  std::vector<std::string> errors(W);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < W; ++r) {
    threads.emplace_back([&, r] {
      try {
        ClusterClient cluster(job.worker(r));
        KvClient kv(ProcessJob::client(cluster, r, job.token()));
        auto& w = weights[r];
        w.resize(kTensors.size());
        if (r == 0) {
          for (size_t t = 0; t < kTensors.size(); ++t) {
            std::vector<float> init(kTensors[t].numel);
            for (size_t i = 0; i < init.size(); ++i) init[i] = init_value(t, i);
            kv.wait(kv.init(kTensors[t].name, init.data(), init.size()));
          }
        }
        for (size_t t = 0; t < kTensors.size(); ++t) kv.wait(kv.pull(kTensors[t].name, &w[t], 0));
        for (int64_t step = 0; step < K; ++step) {
          for (size_t t = 0; t < kTensors.size(); ++t) {
            std::vector<float> g(kTensors[t].numel);
            for (size_t i = 0; i < g.size(); ++i) g[i] = grad_value(r, step, t, i);
            kv.wait(kv.push_pull(kTensors[t].name, g.data(), w[t].data(), g.size(), step));
          }
        }
        cluster.leave(0);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (uint32_t r = 0; r < W; ++r) ASSERT_EQ(errors[r], "") << "worker " << r << "\n" << job.log();

  optim::OptimizerParams p;
  p.name = "adam";
  p.lr = 0.05f;
  auto opt = optim::make_optimizer(p);
  for (size_t t = 0; t < kTensors.size(); ++t) {
    const size_t n = kTensors[t].numel;
    std::vector<float> w(n), state(n * opt->state_floats(), 0.0f), mean(n);
    for (size_t i = 0; i < n; ++i) w[i] = init_value(t, i);
    for (int64_t step = 0; step < K; ++step) {
      for (size_t i = 0; i < n; ++i) {
        float sum = grad_value(0, step, t, i);
        for (uint32_t r = 1; r < W; ++r) sum += grad_value(r, step, t, i);
        mean[i] = sum / static_cast<float>(W);
      }
      opt->apply(w.data(), mean.data(), state.data(), n, 0.05f, step + 1);
    }
    for (uint32_t r = 0; r < W; ++r) {
      for (size_t i = 0; i < n; ++i) {
        EXPECT_NEAR(weights[r][t][i], w[i], 1e-6 * std::max(1.0f, std::fabs(w[i]))) << kTensors[t].name << i;
      }
    }
  }
  // Every worker left: the coordinator shuts the servers down and the job ends cleanly.
  auto result = job.wait_for(std::chrono::seconds(20));
  ASSERT_TRUE(result.has_value()) << job.log();
  for (const ChildExit& e : result->children) EXPECT_FALSE(e.failed()) << e.describe() << "\n" << job.log();
}

// Workers 0 and 1 push step 0; worker 2 leaves with a failure status instead (the coordinator counts it dead).
struct DeadWorkerRun {
  std::vector<float> w0;  // worker 0's weights after its pull of step 1
  std::string error0;
};

DeadWorkerRun run_with_dead_worker(ProcessJob& job, std::chrono::milliseconds pull_timeout) {
  DeadWorkerRun out;
  std::vector<std::thread> threads;
  std::string err1, err2;
  for (uint32_t r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      std::string& err = r == 0 ? out.error0 : (r == 1 ? err1 : err2);
      try {
        ClusterClient cluster(job.worker(r));
        KvClientOptions ko = ProcessJob::client(cluster, r, job.token());
        ko.request_timeout = pull_timeout;
        KvClient kv(ko);
        std::vector<float> w(kTensors[0].numel, 10.0f);
        if (r == 0) {
          for (size_t t = 0; t < kTensors.size(); ++t) {
            std::vector<float> init(kTensors[t].numel, 10.0f);
            kv.wait(kv.init(kTensors[t].name, init.data(), init.size()));
          }
        }
        kv.wait(kv.zpull("fc1.weight", w.data(), w.size(), 0));
        if (r == 2) {
          cluster.leave(1);  // dies before pushing step 0
          return;
        }
        std::vector<float> g(w.size(), r == 0 ? 1.0f : 3.0f);
        kv.wait(kv.zpush("fc1.weight", g.data(), g.size(), 0));
        kv.wait(kv.zpull("fc1.weight", w.data(), w.size(), 1));  // needs the dead worker dealt with
        if (r == 0) out.w0 = w;
        cluster.leave(0);
      } catch (const std::exception& e) {
        err = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

TEST(KvProcesses, ContinuePolicyAggregatesTheSurvivingWorkers) {
  ProcessJob job(2, 3, config("sync", "sgd", 1.0, "continue"));
  DeadWorkerRun r = run_with_dead_worker(job, std::chrono::milliseconds(15000));
  ASSERT_EQ(r.error0, "") << job.log();
  ASSERT_EQ(r.w0.size(), kTensors[0].numel);
  for (float v : r.w0) EXPECT_EQ(v, 10.0f - 2.0f);  // mean of 1 and 3
  auto result = job.wait_for(std::chrono::seconds(20));
  ASSERT_TRUE(result.has_value()) << job.log();
  for (const ChildExit& e : result->children) {
    if (e.name.rfind("server", 0) == 0) {
      EXPECT_FALSE(e.failed()) << e.describe() << "\n" << job.log();
    }
  }
}

TEST(KvProcesses, AbortPolicyEndsTheServersNamingTheDeadWorker) {
  ProcessJob job(2, 3, config("sync", "sgd", 1.0, "abort"));
  const auto start = std::chrono::steady_clock::now();
  DeadWorkerRun r = run_with_dead_worker(job, std::chrono::milliseconds(8000));
  EXPECT_NE(r.error0, "") << "the pull of step 1 cannot succeed once the job is aborted";
  auto result = job.wait_for(std::chrono::seconds(20));
  ASSERT_TRUE(result.has_value()) << job.log();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  // Each server ends because of the abort: it exits non-zero, or (when the
  // coordinator's exit made the supervisor stop it first) it has logged the
  // abort it received.
  const std::string log = job.log();
  for (const ChildExit& e : result->children) {
    if (e.name.rfind("server", 0) != 0) continue;
    const bool logged_abort = log.find("[" + e.name + "] error: job aborted") != std::string::npos;
    EXPECT_TRUE(e.failed() || logged_abort) << e.describe() << "\n" << log;
  }
  EXPECT_NE(log.find("job aborted"), std::string::npos) << log;
  EXPECT_NE(log.find("worker 2"), std::string::npos) << log;
}

}  // namespace
}  // namespace pshard
