// Servers and workers in one process (threads): BSP equals a single-process run, ASP applies every push once,
// SSP blocks a worker exactly when it is staleness+1 clocks ahead, BSP continues without a dead worker, timeouts.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <zmq.hpp>

#include "common/error.h"
#include "common/metrics/trace.h"
#include "optim/lr_schedule.h"
#include "server/kv/kv_server.h"
#include "worker/client/kv_client.h"

namespace pshard {
namespace {

// A hand-built job: S servers on 127.0.0.1 with free ports.
struct Job {
  std::vector<std::unique_ptr<KvServer>> servers;
  std::vector<std::string> endpoints;
  KvServerOptions base;

  Job(uint32_t s, uint32_t w, KvServerOptions o) : base(o) {
    for (uint32_t r = 0; r < s; ++r) {
      KvServerOptions so = o;
      so.rank = r;
      so.num_servers = s;
      so.num_workers = w;
      so.job_token = "job";
      servers.push_back(std::make_unique<KvServer>(so));
      endpoints.push_back(servers.back()->endpoint());
    }
  }
  KvClientOptions client(uint32_t rank, const std::vector<TensorSpec>& tensors) const {
    KvClientOptions c;
    c.rank = rank;
    c.servers = endpoints;
    c.tensors = tensors;
    c.slice_bytes = base.slice_bytes;
    c.job_token = "job";
    c.request_timeout = std::chrono::milliseconds(20000);
    return c;
  }
};

KvServerOptions options(Consistency mode, const std::string& optimizer, float lr, uint64_t slice_bytes) {
  KvServerOptions o;
  o.mode = mode;
  o.slice_bytes = slice_bytes;
  optim::OptimizerParams p;
  p.name = optimizer;
  p.lr = lr;
  o.optimizer = optim::make_optimizer(p);
  optim::LrScheduleParams sp;
  sp.name = "step";
  sp.step_size = 2;
  sp.gamma = 0.5f;
  auto sched = std::make_shared<optim::LrSchedule>(lr, sp, 1, 100);
  o.lr_at = [sched](int64_t step) { return sched->lr_at(step); };
  return o;
}

float grad_value(uint32_t rank, int64_t step, size_t tensor, size_t i) {
  return std::sin(0.37f * static_cast<float>(i) + 0.11f * static_cast<float>(step) + static_cast<float>(tensor)) *
         (1.0f + 0.5f * static_cast<float>(rank));
}
float init_value(size_t tensor, size_t i) { return 0.01f * static_cast<float>((i * 7 + tensor * 3) % 23) - 0.1f; }

// Tensor sizes that do not divide the 64-byte (16-float) slices.
const std::vector<TensorSpec> kTensors = {{"fc1.weight", 37}, {"fc1.bias", 53}, {"fc2.weight", 7}, {"fc2.bias", 16}};

// Runs W workers for `steps` BSP steps with push_pull; returns each worker's final weights.
// `tracer`: every server records the tracer's window into it (trace.steps).
std::vector<std::vector<std::vector<float>>> run_bsp(uint32_t s, uint32_t w, int64_t steps, uint64_t inline_bytes,
                                                     std::shared_ptr<Tracer> tracer = nullptr, int update_threads = 2,
                                                     int io_threads = 0) {
  KvServerOptions o = options(Consistency::kBsp, "adam", 0.05f, 64);
  o.inline_slice_bytes = inline_bytes;
  o.tracer = tracer;
  o.update_threads = update_threads;
  o.io_threads = io_threads;
  Job job(s, w, o);
  for (const auto& server : job.servers) {
    EXPECT_EQ(server->io_threads(),
              KvServerOptions::resolve_io_threads(io_threads, w, std::thread::hardware_concurrency()));
  }
  std::vector<std::vector<std::vector<float>>> result(w);
  std::vector<std::string> errors(w);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < w; ++r) {
    threads.emplace_back([&, r] {
      try {
        KvClient kv(job.client(r, kTensors));
        auto& weights = result[r];
        weights.resize(kTensors.size());
        std::vector<std::vector<float>> grads(kTensors.size());
        if (r == 0) {
          std::vector<KvClient::Handle> hs;
          std::vector<std::vector<float>> init(kTensors.size());
          for (size_t t = 0; t < kTensors.size(); ++t) {
            for (size_t i = 0; i < kTensors[t].numel; ++i) init[t].push_back(init_value(t, i));
            hs.push_back(kv.init(kTensors[t].name, init[t].data(), init[t].size()));
          }
          for (auto h : hs) kv.wait(h);
        }
        for (size_t t = 0; t < kTensors.size(); ++t) kv.wait(kv.pull(kTensors[t].name, &weights[t], 0));
        for (int64_t step = 0; step < steps; ++step) {
          std::vector<KvClient::Handle> hs;
          for (size_t t = 0; t < kTensors.size(); ++t) {
            grads[t].resize(kTensors[t].numel);
            for (size_t i = 0; i < grads[t].size(); ++i) grads[t][i] = grad_value(r, step, t, i);
            hs.push_back(kv.zpush_pull(kTensors[t].name, grads[t].data(), weights[t].data(), grads[t].size(), step));
          }
          for (auto h : hs) kv.wait(h);
        }
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (uint32_t r = 0; r < w; ++r) EXPECT_EQ(errors[r], "") << "worker " << r;
  return result;
}

TEST(KvConsistency, BspEqualsSingleProcessWithMeanGradientsAndIsBitReproducible) {
  const uint32_t S = 2, W = 3;
  const int64_t K = 5;
  auto run1 = run_bsp(S, W, K, /*inline_bytes=*/0);        // every slice on the update threads
  auto run2 = run_bsp(S, W, K, /*inline_bytes=*/1 << 16);  // every slice on the socket thread

  // Reference: one process, the mean of the W gradients (summed in rank order), same optimizer and schedule.
  KvServerOptions o = options(Consistency::kBsp, "adam", 0.05f, 64);
  for (size_t t = 0; t < kTensors.size(); ++t) {
    const size_t n = kTensors[t].numel;
    std::vector<float> w(n), state(n * o.optimizer->state_floats(), 0.0f), mean(n);
    for (size_t i = 0; i < n; ++i) w[i] = init_value(t, i);
    for (int64_t step = 0; step < K; ++step) {
      for (size_t i = 0; i < n; ++i) {
        float sum = grad_value(0, step, t, i);
        for (uint32_t r = 1; r < W; ++r) sum += grad_value(r, step, t, i);
        mean[i] = sum / static_cast<float>(W);
      }
      o.optimizer->apply(w.data(), mean.data(), state.data(), n, o.lr_at(step), step + 1);
    }
    for (uint32_t r = 0; r < W; ++r) {
      ASSERT_EQ(run1[r][t].size(), n);
      for (size_t i = 0; i < n; ++i) {
        EXPECT_NEAR(run1[r][t][i], w[i], 1e-6 * std::max(1.0f, std::fabs(w[i])))
            << kTensors[t].name << "[" << i << "] worker " << r;
      }
      // Deterministic: a second job (with a different thread placement) gives the same bits.
      EXPECT_EQ(std::memcmp(run1[r][t].data(), run2[r][t].data(), n * sizeof(float)), 0) << kTensors[t].name;
    }
    EXPECT_NE(w[0], init_value(t, 0));  // the weights moved
  }
}

// The tracer's spans as written to a file (Chrome trace events).
Json written_trace(Tracer& tracer) {
  const std::string path = ::testing::TempDir() + "/kv-consistency-trace.json";
  tracer.write(path, ClockOffset{});
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  std::remove(path.c_str());
  return Json::parse(buf.str(), path);
}

// cluster.server_threads = 0: no update threads; every slice, however large, is aggregated and updated on the
// socket thread (trace row 0), with the same bits as on the update threads.
TEST(KvConsistency, NoUpdateThreadsUpdatesEverySliceOnTheSocketThreadWithTheSameBits) {
  const uint32_t S = 2, W = 3;
  auto tracer = std::make_shared<Tracer>(TraceWindow::parse("1-3", "trace.steps"), "servers");
  auto threaded = run_bsp(S, W, 4, /*inline_bytes=*/0);  // every slice on the update threads
  auto socket_only = run_bsp(S, W, 4, /*inline_bytes=*/0, tracer, /*update_threads=*/0);
  ASSERT_EQ(socket_only, threaded);
  const Json doc = written_trace(*tracer);
  int aggregates = 0;
  for (const Json& e : doc.at("traceEvents").elements()) {
    if (e.at("ph").as_string() != "X") continue;
    const std::string name = e.at("name").as_string();
    if (name.rfind("aggregate ", 0) != 0 && name.rfind("update ", 0) != 0) continue;
    aggregates += name.rfind("aggregate ", 0) == 0;
    EXPECT_EQ(e.at("tid").as_int(), 0) << e.dump();
  }
  // Steps 1-3 (after the inits and first pulls of step 0): 9 slices (see below), each taken in W times a step.
  EXPECT_EQ(aggregates, 3 * 3 * 9);
}

// cluster.server_io_threads: how many ZeroMQ I/O threads serve the workers' connections changes no bit of a sync
// job (libzmq spreads the accepted connections over them).
TEST(KvConsistency, ServerIoThreadsServeTheWorkersWithTheSameBits) {
  EXPECT_EQ(KvServerOptions::resolve_io_threads(0, 1, 16), 1);  // auto: one per worker
  EXPECT_EQ(KvServerOptions::resolve_io_threads(0, 4, 16), 4);
  EXPECT_EQ(KvServerOptions::resolve_io_threads(0, 8, 2), 2);     // at most the cores
  EXPECT_EQ(KvServerOptions::resolve_io_threads(0, 64, 128), 8);  // and at most 8
  EXPECT_EQ(KvServerOptions::resolve_io_threads(0, 3, 0), 1);     // cores unknown
  EXPECT_EQ(KvServerOptions::resolve_io_threads(3, 1, 2), 3);     // as configured
  const uint32_t S = 2, W = 3;
  auto one = run_bsp(S, W, 4, /*inline_bytes=*/0, nullptr, 2, /*io_threads=*/1);
  auto three = run_bsp(S, W, 4, /*inline_bytes=*/0, nullptr, 2, /*io_threads=*/3);
  EXPECT_EQ(three, one);
}

// Tracing the servers changes nothing they compute, and records the window's requests: receive and
// reply per request, aggregate per slice (on the socket and update threads), update per closed slice.
TEST(KvConsistency, TracedServersRecordTheWindowAndComputeTheSame) {
  const uint32_t S = 2, W = 3;
  auto tracer = std::make_shared<Tracer>(TraceWindow::parse("1-2", "trace.steps"), "servers");
  // 32 B: the full 16-float slices on the update threads, the short last slices on the socket thread.
  auto traced = run_bsp(S, W, 4, /*inline_bytes=*/32, tracer);
  auto plain = run_bsp(S, W, 4, /*inline_bytes=*/32);
  ASSERT_EQ(traced, plain);
  const Json doc = written_trace(*tracer);
  std::map<std::string, int> kinds;
  for (const Json& e : doc.at("traceEvents").elements()) {
    if (e.at("ph").as_string() != "X") continue;
    const std::string name = e.at("name").as_string();
    ++kinds[name.substr(0, name.find(' '))];
    const int64_t step = e.at("args").at("step").as_int();
    EXPECT_TRUE(step == 1 || step == 2) << e.dump();
  }
  // Per step: W workers x 4 tensors push_pull, each tensor's slices on one or both servers.
  EXPECT_GE(kinds["receive"], 2 * 3 * 4);
  EXPECT_EQ(kinds["receive"], kinds["reply"]);
  // 37 + 53 + 7 + 16 floats in 16-float slices: 3 + 4 + 1 + 1 = 9 slices, each taken in W times a step and
  // updated once.
  EXPECT_EQ(kinds["aggregate"], 2 * 3 * 9);
  EXPECT_EQ(kinds["update"], 2 * 9);
}

TEST(KvConsistency, AspAppliesEveryPushExactlyOnce) {
  const uint32_t W = 3;
  const int64_t K = 20;
  KvServerOptions o = options(Consistency::kAsp, "sgd", 1.0f, 64);
  o.lr_at = [](int64_t) { return 1.0f; };
  o.inline_slice_bytes = 32;  // slices of 16 floats go to the update threads, smaller ones stay inline
  Job job(2, W, o);
  const std::vector<TensorSpec> tensors = {{"a", 50}, {"b", 5}};
  std::vector<std::thread> threads;
  std::vector<std::string> errors(W);
  for (uint32_t r = 0; r < W; ++r) {
    threads.emplace_back([&, r] {
      try {
        KvClient kv(job.client(r, tensors));
        if (r == 0) {
          std::vector<float> za(50, 0.0f), zb(5, 0.0f);
          kv.wait(kv.init("a", za.data(), za.size()));
          kv.wait(kv.init("b", zb.data(), zb.size()));
        }
        std::vector<float> w;
        kv.wait(kv.pull("a", &w, 0));  // every worker pulls every tensor before step 0
        kv.wait(kv.pull("b", &w, 0));
        for (int64_t t = 0; t < K; ++t) {
          std::vector<float> ga(50), gb(5);
          for (size_t i = 0; i < ga.size(); ++i) ga[i] = static_cast<float>((r + 1) * (t + 1)) + static_cast<float>(i);
          for (size_t i = 0; i < gb.size(); ++i) gb[i] = static_cast<float>(r + 1);
          auto h1 = kv.push("a", ga.data(), ga.size(), t);
          auto h2 = kv.push("b", gb.data(), gb.size(), t);
          ga.assign(ga.size(), 1e9f);  // push() copied: changing the buffer now must not matter
          kv.wait(h1);
          kv.wait(h2);
        }
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (uint32_t r = 0; r < W; ++r) ASSERT_EQ(errors[r], "") << "worker " << r;
  KvClient reader(job.client(1, tensors));
  std::vector<float> a, b;
  reader.wait(reader.pull("a", &a, 0));
  reader.wait(reader.pull("b", &b, 0));
  // w = -sum_r sum_t g: sum_r (r+1) = 6, sum_t (t+1) = 210; each push adds i once more.
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], -(6.0f * 210.0f + static_cast<float>(W * K * i))) << i;
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(b[i], -6.0f * K) << i;
  uint64_t updates = 0;
  for (auto& s : job.servers) updates += s->stats().updates;
  EXPECT_EQ(updates, W * K * (4 + 1));  // "a" has 4 slices, "b" one
}

TEST(KvConsistency, SspBlocksAWorkerTwoClocksAheadOfTheSlowestAndNotBefore) {
  KvServerOptions o = options(Consistency::kSsp, "sgd", 1.0f, 64);
  o.lr_at = [](int64_t) { return 1.0f; };
  o.staleness = 1;
  Job job(1, 2, o);
  const std::vector<TensorSpec> tensors = {{"w", 20}};
  KvClient fast(job.client(0, tensors));
  KvClient slow(job.client(1, tensors));
  std::vector<float> w(20, 0.0f), g(20, 1.0f);
  fast.wait(fast.init("w", w.data(), w.size()));
  fast.wait(fast.zpull("w", w.data(), w.size(), 0));
  slow.wait(slow.zpull("w", w.data(), w.size(), 0));

  fast.wait(fast.zpush("w", g.data(), g.size(), 0));  // fast at clock 1, slow at 0: 1 ahead
  auto h = fast.zpull("w", w.data(), w.size(), 1);
  EXPECT_TRUE(fast.wait_for(h, std::chrono::seconds(5))) << "1 clock ahead with s=1 must not block";
  EXPECT_EQ(w[0], -1.0f);

  fast.wait(fast.zpush("w", g.data(), g.size(), 1));  // fast at clock 2: 2 ahead
  h = fast.zpull("w", w.data(), w.size(), 2);
  EXPECT_FALSE(fast.wait_for(h, std::chrono::milliseconds(500))) << "2 clocks ahead with s=1 must block";

  std::vector<float> ws(20);
  slow.wait(slow.zpush("w", g.data(), g.size(), 0));  // slow reaches clock 1: the fast reader may go on
  EXPECT_TRUE(fast.wait_for(h, std::chrono::seconds(5)));
  EXPECT_EQ(w[0], -3.0f);  // three pushes applied
}

TEST(KvConsistency, BspContinuesWithoutADeadWorker) {
  KvServerOptions o = options(Consistency::kBsp, "sgd", 1.0f, 64);
  o.lr_at = [](int64_t) { return 1.0f; };
  Job job(2, 3, o);
  const std::vector<TensorSpec> tensors = {{"w", 40}};
  std::vector<std::unique_ptr<KvClient>> kv;
  for (uint32_t r = 0; r < 3; ++r) kv.push_back(std::make_unique<KvClient>(job.client(r, tensors)));
  std::vector<float> w(40, 10.0f);
  kv[0]->wait(kv[0]->init("w", w.data(), w.size()));
  std::vector<float> g0(40, 1.0f), g1(40, 3.0f), g2(40, 100.0f);
  kv[0]->wait(kv[0]->zpush("w", g0.data(), 40, 0));
  kv[1]->wait(kv[1]->zpush("w", g1.data(), 40, 0));
  auto h = kv[0]->zpull("w", w.data(), 40, 1);
  EXPECT_FALSE(kv[0]->wait_for(h, std::chrono::milliseconds(300))) << "step 0 must wait for worker 2";
  for (auto& s : job.servers) s->mark_worker_dead(2);
  ASSERT_TRUE(kv[0]->wait_for(h, std::chrono::seconds(5)));
  for (float v : w) EXPECT_EQ(v, 10.0f - 2.0f);  // mean of the two live workers' gradients

  // The next step needs only workers 0 and 1; the dead worker is refused.
  kv[0]->wait(kv[0]->zpush("w", g0.data(), 40, 1));
  kv[1]->wait(kv[1]->zpush("w", g0.data(), 40, 1));
  kv[1]->wait(kv[1]->zpull("w", w.data(), 40, 2));
  for (float v : w) EXPECT_EQ(v, 7.0f);
  try {
    kv[2]->wait(kv[2]->zpush("w", g2.data(), 40, 2));
    FAIL() << "a dead worker's push was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("workerDead"), std::string::npos) << e.what();
  }
}

// cluster.backup_workers = 1, every slice on an update thread: a step closes without the last worker's push once the
// grace has passed; that push, late, is taken and dropped, and its reply says so and brings the weights of the step
// the servers are at (weightsStep).
TEST(KvConsistency, BspWithABackupWorkerClosesWithoutTheLastPushAndTellsItLate) {
  KvServerOptions o = options(Consistency::kBsp, "sgd", 1.0f, 64);
  o.lr_at = [](int64_t) { return 1.0f; };
  o.inline_slice_bytes = 0;
  o.backup.count = 1;
  o.backup.grace_share = 0;
  o.backup.grace_min = std::chrono::milliseconds(20);
  Job job(2, 3, o);
  const std::vector<TensorSpec> tensors = {{"w", 40}};  // 3 slices over 2 servers
  std::vector<std::unique_ptr<KvClient>> kv;
  for (uint32_t r = 0; r < 3; ++r) kv.push_back(std::make_unique<KvClient>(job.client(r, tensors)));
  std::vector<float> w0(40, 10.0f), w1(40, 0.0f), w2(40, 0.0f);
  kv[0]->wait(kv[0]->init("w", w0.data(), w0.size()));
  std::vector<float> g0(40, 1.0f), g1(40, 3.0f), g2(40, 100.0f);
  const auto h0 = kv[0]->zpush_pull("w", g0.data(), w0.data(), 40, 0);
  const auto h1 = kv[1]->zpush_pull("w", g1.data(), w1.data(), 40, 0);
  const KvClient::ReplyNotes n0 = kv[0]->wait_noting(h0), n1 = kv[1]->wait_noting(h1);
  EXPECT_EQ(n0.weights_step, 1);
  EXPECT_FALSE(n0.late || n1.late);
  for (float v : w1) EXPECT_EQ(v, 10.0f - 2.0f);  // the mean of workers 0 and 1
  const KvClient::ReplyNotes n2 = kv[2]->wait_noting(kv[2]->zpush_pull("w", g2.data(), w2.data(), 40, 0));
  EXPECT_TRUE(n2.late);
  EXPECT_EQ(n2.weights_step, 1);
  for (float v : w2) EXPECT_EQ(v, 8.0f);  // its gradient was dropped
  // All three on time: the step closes when the last push comes, without a grace.
  std::vector<KvClient::Handle> h;
  std::vector<std::vector<float>> out(3, std::vector<float>(40));
  for (uint32_t r = 0; r < 3; ++r) h.push_back(kv[r]->zpush_pull("w", g0.data(), out[r].data(), 40, 1));
  std::vector<float> w(40);
  for (uint32_t r = 0; r < 3; ++r) EXPECT_FALSE(kv[r]->wait_noting(h[r]).late);
  kv[2]->wait(kv[2]->zpull("w", w.data(), 40, 2));
  for (float v : w) EXPECT_EQ(v, 7.0f);
}

// Loss scaling in a sync job, 3 workers and 2 servers (3 slices, on update threads): worker 1's gradients of step 0
// overflowed, and its pushes say skipped. Every slice closes the step without applying anything (its NaN is not
// refused), every worker's reply says skipped and brings the unchanged weights; the step's second try, all finite,
// applies its mean once per slice. Nobody else is asked: the workers learn it from their own replies.
TEST(KvConsistency, BspSkipsAStepOnEveryServerWhenOnePushSaysItsGradientsAreNotFinite) {
  KvServerOptions o = options(Consistency::kBsp, "sgd", 1.0f, 64);
  o.lr_at = [](int64_t) { return 1.0f; };
  o.inline_slice_bytes = 0;
  Job job(2, 3, o);
  const std::vector<TensorSpec> tensors = {{"w", 40}};
  std::vector<std::unique_ptr<KvClient>> kv;
  for (uint32_t r = 0; r < 3; ++r) kv.push_back(std::make_unique<KvClient>(job.client(r, tensors)));
  std::vector<float> init(40, 10.0f);
  kv[0]->wait(kv[0]->init("w", init.data(), init.size()));
  std::vector<std::vector<float>> g = {std::vector<float>(40, 1.0f), std::vector<float>(40, 2.0f),
                                       std::vector<float>(40, 3.0f)};
  g[1][7] = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::vector<float>> out(3, std::vector<float>(40, -1.0f));
  kv[1]->request_skip(0);
  std::vector<KvClient::Handle> h;
  for (uint32_t r = 0; r < 3; ++r) h.push_back(kv[r]->zpush_pull("w", g[r].data(), out[r].data(), 40, 0));
  for (uint32_t r = 0; r < 3; ++r) {
    const KvClient::ReplyNotes n = kv[r]->wait_noting(h[r]);
    EXPECT_TRUE(n.skipped) << "worker " << r;
    EXPECT_EQ(n.weights_step, 0) << "worker " << r;
    EXPECT_EQ(out[r], init) << "worker " << r;
  }
  uint64_t updates = 0;
  for (auto& s : job.servers) updates += s->stats().updates;
  EXPECT_EQ(updates, 0u);
  kv[1]->request_skip(-1);
  g[1][7] = 2.0f;
  h.clear();
  for (uint32_t r = 0; r < 3; ++r) h.push_back(kv[r]->zpush_pull("w", g[r].data(), out[r].data(), 40, 0));
  for (uint32_t r = 0; r < 3; ++r) {
    const KvClient::ReplyNotes n = kv[r]->wait_noting(h[r]);
    EXPECT_FALSE(n.skipped) << "worker " << r;
    EXPECT_EQ(n.weights_step, 1) << "worker " << r;
    EXPECT_EQ(out[r], std::vector<float>(40, 8.0f)) << "worker " << r;  // 10 - the mean of 1, 2 and 3
  }
  updates = 0;
  for (auto& s : job.servers) updates += s->stats().updates;
  EXPECT_EQ(updates, 3u);  // one per slice
}

// An async job's workers skip their overflowed steps alone, by not pushing them: a push that asks the servers to
// skip is refused, naming why.
TEST(KvConsistency, AnAsyncServerRefusesAPushThatAsksToSkipItsStep) {
  KvServerOptions o = options(Consistency::kAsp, "sgd", 1.0f, 64);
  Job job(1, 1, o);
  const std::vector<TensorSpec> tensors = {{"w", 4}};
  KvClient kv(job.client(0, tensors));
  std::vector<float> w(4, 1.0f);
  kv.wait(kv.init("w", w.data(), w.size()));
  kv.request_skip(0);
  try {
    kv.wait(kv.push("w", w.data(), w.size(), 0));
    FAIL() << "the push was taken";
  } catch (const KvError& e) {
    EXPECT_EQ(e.code(), protocol::ErrorCode::BAD_HEADER);
    EXPECT_NE(std::string(e.what()).find("worker 0 asked to skip step 0: only sync jobs skip a step for all"),
              std::string::npos)
        << e.what();
  }
}

// A death can make the quorum: 3 workers, one backup; worker 0 pushed, worker 2 dies. The step then closes after the
// grace without worker 1, on whichever thread owns each slice (the socket thread and an update thread here).
TEST(KvConsistency, BspWithABackupWorkerClosesByTheClockOnceADeathMadeTheQuorum) {
  KvServerOptions o = options(Consistency::kBsp, "sgd", 1.0f, 64);
  o.lr_at = [](int64_t) { return 1.0f; };
  o.inline_slice_bytes = 32;  // x's last slice (32 bytes) on the socket thread, the other slices (64) on update threads
  o.backup.count = 1;
  o.backup.grace_share = 0;
  o.backup.grace_min = std::chrono::milliseconds(20);
  Job job(1, 3, o);
  const std::vector<TensorSpec> tensors = {{"w", 32}, {"x", 40}};
  std::vector<std::unique_ptr<KvClient>> kv;
  for (uint32_t r = 0; r < 3; ++r) kv.push_back(std::make_unique<KvClient>(job.client(r, tensors)));
  std::vector<float> w(32, 10.0f), x(40, 10.0f), g(40, 2.0f);
  kv[0]->wait(kv[0]->init("w", w.data(), w.size()));
  kv[0]->wait(kv[0]->init("x", x.data(), x.size()));
  const auto hw = kv[0]->zpush_pull("w", g.data(), w.data(), 32, 0);
  const auto hx = kv[0]->zpush_pull("x", g.data(), x.data(), 40, 0);
  EXPECT_FALSE(kv[0]->wait_for(hw, std::chrono::milliseconds(300))) << "1 of 3 pushed: no quorum yet";
  job.servers[0]->mark_worker_dead(2);
  ASSERT_TRUE(kv[0]->wait_for(hw, std::chrono::seconds(5)));
  ASSERT_TRUE(kv[0]->wait_for(hx, std::chrono::seconds(5)));
  for (float v : w) EXPECT_EQ(v, 8.0f);  // worker 0's gradient alone
  for (float v : x) EXPECT_EQ(v, 8.0f);
}

TEST(KvConsistency, TimeoutErrorNamesTheServerAndTheTensor) {
  zmq::context_t ctx;
  zmq::socket_t silent(ctx, zmq::socket_type::router);  // accepts connections, never answers
  silent.set(zmq::sockopt::linger, 0);
  silent.bind("tcp://127.0.0.1:*");
  const std::string ep = silent.get(zmq::sockopt::last_endpoint);
  KvClientOptions c;
  c.servers = {ep};
  c.tensors = {{"fc1.weight", 10}};
  c.job_token = "";  // no security, like the silent socket: the connection is made, and nothing ever answers
  c.request_timeout = std::chrono::milliseconds(200);
  KvClient kv(c);
  std::vector<float> w(10);
  const auto start = std::chrono::steady_clock::now();
  try {
    kv.wait(kv.zpull("fc1.weight", w.data(), w.size(), 0));
    FAIL() << "no timeout";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("server 0 (" + ep + ")"), std::string::npos) << what;
    EXPECT_NE(what.find("fc1.weight"), std::string::npos) << what;
    EXPECT_NE(what.find("timeout"), std::string::npos) << what;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

// A peer whose handshake fails (here: the client offers the job token, the socket takes no security) ends the
// connection for good. A request sent after that fails at once naming the server, instead of blocking in the send
// forever (under load a send once came after the failed handshake and hung the client, past every timeout).
TEST(KvConsistency, ARequestToAPeerWhoseHandshakeFailedEndsWithAnError) {
  zmq::context_t ctx;
  zmq::socket_t other(ctx, zmq::socket_type::router);
  other.set(zmq::sockopt::linger, 0);
  other.bind("tcp://127.0.0.1:*");
  const std::string ep = other.get(zmq::sockopt::last_endpoint);
  KvClientOptions c;
  c.servers = {ep};
  c.tensors = {{"fc1.weight", 10}};
  c.job_token = "job";
  c.request_timeout = std::chrono::milliseconds(200);
  KvClient kv(c);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the handshake has failed by now
  std::vector<float> w(10);
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    try {
      kv.wait(kv.zpull("fc1.weight", w.data(), w.size(), 0));
      FAIL() << "a pull through a failed handshake was answered";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("server 0 (" + ep + ")"), std::string::npos) << what;
      EXPECT_NE(what.find("fc1.weight"), std::string::npos) << what;
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  }
}

// A worker that is alive but never pushes: the server reports who it waits for while the step waits, then answers
// the waiting worker with a `stalled` error naming the missing worker, before that worker's own timeout would blame
// the (healthy) server.
TEST(KvConsistency, AStalledStepNamesTheWorkerThatDidNotPush) {
  KvServerOptions o = options(Consistency::kBsp, "sgd", 0.1f, 64);
  o.update_threads = 1;
  o.inline_slice_bytes = 64;  // fc1.weight's slices on the socket thread, fc1.bias's on the update thread
  o.stall_warn = std::chrono::milliseconds(150);
  o.stall_give_up = std::chrono::milliseconds(900);
  std::mutex mu;
  std::vector<StallReport> reports;
  o.on_stall = [&](const StallReport& r) {
    std::lock_guard<std::mutex> lock(mu);
    reports.push_back(r);
  };
  Job job(1, 3, o);
  const std::vector<TensorSpec> tensors = {{"fc1.weight", 16}, {"fc1.bias", 40}};
  KvClientOptions c0 = job.client(0, tensors), c2 = job.client(2, tensors);
  c0.request_timeout = c2.request_timeout = std::chrono::milliseconds(5000);
  KvClient w0(c0), w2(c2);
  std::vector<float> a(16, 0.5f), b(40, 0.25f), g(40, 1.0f);
  w0.wait(w0.init("fc1.weight", a.data(), a.size()));
  w0.wait(w0.init("fc1.bias", b.data(), b.size()));
  // Workers 0 and 2 push step 0 of both tensors; worker 1 never does.
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> a2(a), b2(b);
  const std::vector<std::pair<KvClient*, KvClient::Handle>> handles = {
      {&w0, w0.zpush_pull("fc1.weight", g.data(), a.data(), a.size(), 0)},
      {&w0, w0.zpush_pull("fc1.bias", g.data(), b.data(), b.size(), 0)},
      {&w2, w2.zpush_pull("fc1.weight", g.data(), a2.data(), a2.size(), 0)},
      {&w2, w2.zpush_pull("fc1.bias", g.data(), b2.data(), b2.size(), 0)}};
  for (const auto& [kv, h] : handles) {
    try {
      kv->wait(h);
      FAIL() << "a step without worker 1's push was answered";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("stalled"), std::string::npos) << what;
      EXPECT_NE(what.find("for the push of worker 1, which did not come"), std::string::npos) << what;
      EXPECT_EQ(what.find("did not answer"), std::string::npos) << what;
    }
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(850));
  EXPECT_LT(waited, std::chrono::milliseconds(4000));  // well before the workers' 5 s timeout
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_FALSE(reports.empty());
  EXPECT_EQ(reports[0].step, 1);  // the readers wait for step 1's weights
  EXPECT_EQ(reports[0].missing, std::vector<uint32_t>({1}));
  EXPECT_FALSE(reports[0].initial_weights);
  EXPECT_GE(reports[0].waited_s, 0.15);
  // Reported again each further period, never twice for the same period.
  EXPECT_GE(reports.size(), 3u);
  EXPECT_LE(reports.size(), 7u);
}

// Worker 0 initialised one tensor (the layout is known) but never the other: a pull of the other waits for "worker
// 0's initial weights" and says so.
TEST(KvConsistency, APullOfATensorNeverInitialisedNamesWorkerZero) {
  KvServerOptions o = options(Consistency::kBsp, "sgd", 0.1f, 64);
  o.stall_warn = std::chrono::milliseconds(100);
  o.stall_give_up = std::chrono::milliseconds(400);
  std::mutex mu;
  std::vector<StallReport> reports;
  o.on_stall = [&](const StallReport& r) {
    std::lock_guard<std::mutex> lock(mu);
    reports.push_back(r);
  };
  Job job(1, 2, o);
  const std::vector<TensorSpec> tensors = {{"a", 8}, {"b", 8}};
  KvClient w0(job.client(0, tensors)), w1(job.client(1, tensors));
  std::vector<float> w(8, 1.0f), out(8);
  w0.wait(w0.init("a", w.data(), w.size()));
  try {
    w1.wait(w1.zpull("b", out.data(), out.size(), 0));
    FAIL() << "a pull of weights nobody sent was answered";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stalled: server 0: b[slice 0]: the read for step 0 waited"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("for worker 0's initial weights"), std::string::npos) << e.what();
  }
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_FALSE(reports.empty());
  EXPECT_TRUE(reports[0].initial_weights);
  EXPECT_EQ(reports[0].missing, std::vector<uint32_t>({0}));
}

// A step that waits stall_stuck for a worker's push reports that worker stuck, once for the step, whichever threads
// own the waiting slices. Removing it, as the coordinator's verdict under failure policy continue does, closes the
// step: the healthy workers' reads are answered, before any would be given up.
TEST(KvConsistency, AStepWaitingForAStuckWorkerNamesItAndClosesOnceItIsRemoved) {
  KvServerOptions o = options(Consistency::kBsp, "sgd", 0.5f, 64);
  o.update_threads = 1;
  o.inline_slice_bytes = 64;  // fc1.weight's slices on the socket thread, fc1.bias's on the update thread
  o.stall_warn = std::chrono::milliseconds(0);
  o.stall_stuck = std::chrono::milliseconds(400);
  o.stall_give_up = std::chrono::milliseconds(4000);
  std::mutex mu;
  std::vector<StallReport> reports;
  std::atomic<KvServer*> server{nullptr};
  o.on_stall = [&](const StallReport& r) {
    {
      std::lock_guard<std::mutex> lock(mu);
      reports.push_back(r);
    }
    if (r.stuck) {
      for (uint32_t w : r.missing) server.load()->mark_worker_dead(w);
    }
  };
  Job job(1, 3, o);
  server = job.servers[0].get();
  const std::vector<TensorSpec> tensors = {{"fc1.weight", 16}, {"fc1.bias", 40}};
  KvClientOptions c0 = job.client(0, tensors), c2 = job.client(2, tensors);
  c0.request_timeout = c2.request_timeout = std::chrono::milliseconds(5000);
  KvClient w0(c0), w2(c2);
  std::vector<float> a(16, 0.5f), b(40, 0.25f), g0(40, 1.0f), g2(40, 3.0f);
  w0.wait(w0.init("fc1.weight", a.data(), a.size()));
  w0.wait(w0.init("fc1.bias", b.data(), b.size()));
  // Workers 0 and 2 push step 0 of both tensors; worker 1 never does.
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> a0(a), b0(b), a2(a), b2(b);
  const std::vector<std::pair<KvClient*, KvClient::Handle>> handles = {
      {&w0, w0.zpush_pull("fc1.weight", g0.data(), a0.data(), a0.size(), 0)},
      {&w0, w0.zpush_pull("fc1.bias", g0.data(), b0.data(), b0.size(), 0)},
      {&w2, w2.zpush_pull("fc1.weight", g2.data(), a2.data(), a2.size(), 0)},
      {&w2, w2.zpush_pull("fc1.bias", g2.data(), b2.data(), b2.size(), 0)}};
  for (const auto& [kv, h] : handles) EXPECT_NO_THROW(kv->wait(h));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(380));
  EXPECT_LT(waited, std::chrono::milliseconds(3000));  // well before the reads would be given up
  // The step closed with the two contributions: w - lr * mean(g0, g2) = w - 0.5 * 2.
  for (float v : a0) EXPECT_FLOAT_EQ(v, 0.5f - 1.0f);
  for (float v : b2) EXPECT_FLOAT_EQ(v, 0.25f - 1.0f);
  EXPECT_EQ(a0, a2);
  EXPECT_EQ(b0, b2);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(reports.size(), 1u);  // no warnings (stall_warn 0), one verdict for the step
  EXPECT_TRUE(reports[0].stuck);
  EXPECT_EQ(reports[0].step, 1);
  EXPECT_EQ(reports[0].missing, std::vector<uint32_t>({1}));
  EXPECT_NE(reports[0].why.find(": the read for step 1 waited "), std::string::npos) << reports[0].why;
  EXPECT_NE(reports[0].why.find(" for the push of worker 1, which did not come"), std::string::npos) << reports[0].why;
}

// Async reads never wait, so a worker that stops pushing holds nobody up but the job's end: the server reports it
// stuck once it pushed nothing for stall_stuck (once, and again only after it pushed since), never the worker that
// keeps pushing.
TEST(KvConsistency, AnAsyncWorkerThatStopsPushingIsReportedStuck) {
  KvServerOptions o = options(Consistency::kAsp, "sgd", 0.1f, 64);
  o.stall_stuck = std::chrono::milliseconds(400);
  std::mutex mu;
  std::vector<StallReport> reports;
  o.on_stall = [&](const StallReport& r) {
    std::lock_guard<std::mutex> lock(mu);
    reports.push_back(r);
  };
  Job job(1, 2, o);
  const std::vector<TensorSpec> tensors = {{"w", 16}};
  KvClient w0(job.client(0, tensors)), w1(job.client(1, tensors));
  std::vector<float> w(16, 1.0f), g(16, 0.5f);
  w0.wait(w0.init("w", w.data(), w.size()));
  w1.wait(w1.push("w", g.data(), g.size(), 0));
  auto count = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return reports.size();
  };
  // Worker 0 pushes every 50 ms; worker 1 pushed once. It is reported once, however long it stays silent.
  auto push_for = [&](std::chrono::milliseconds how_long, int64_t step) {
    const auto end = std::chrono::steady_clock::now() + how_long;
    for (; std::chrono::steady_clock::now() < end; ++step) {
      w0.wait(w0.push("w", g.data(), g.size(), step));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return step;
  };
  int64_t step = push_for(std::chrono::milliseconds(1200), 0);
  ASSERT_EQ(count(), 1u);
  // Once it pushes again its clock starts over.
  w1.wait(w1.push("w", g.data(), g.size(), 1));
  push_for(std::chrono::milliseconds(200), step);
  EXPECT_EQ(count(), 1u);
  push_for(std::chrono::milliseconds(700), step);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(reports.size(), 2u);
  for (const StallReport& r : reports) {
    EXPECT_TRUE(r.stuck);
    EXPECT_EQ(r.step, -1);
    EXPECT_EQ(r.missing, std::vector<uint32_t>({1}));
    EXPECT_GE(r.waited_s, 0.4);
    EXPECT_EQ(r.why.rfind("no push from worker 1 for ", 0), 0u) << r.why;
  }
}

TEST(KvConsistency, WrongSizesAndUnknownTensorsAreCallerErrors) {
  KvServerOptions o = options(Consistency::kAsp, "sgd", 1.0f, 64);
  Job job(1, 1, o);
  KvClient kv(job.client(0, {{"w", 8}}));
  std::vector<float> w(9);
  EXPECT_THROW(kv.push("w", w.data(), 9, 0), Error);
  EXPECT_THROW(kv.push("nope", w.data(), 8, 0), Error);
  EXPECT_THROW(kv.wait(12345), Error);
}

}  // namespace
}  // namespace pshard
