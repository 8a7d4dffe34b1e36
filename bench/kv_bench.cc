// `pshard bench kv`: the driver, the benchmark worker, the raw TCP baseline and the text report (bench/kv_bench.h).
#include "bench/kv_bench.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <zmq.hpp>

#include "bench/text.h"
#include "common/error.h"
#include "common/transport/buffer_pool.h"
#include "common/transport/curve.h"
#include "common/transport/shm_channel.h"
#include "common/util/child_process.h"
#include "common/util/host.h"
#include "common/util/log.h"
#include "launcher/job_plan.h"
#include "launcher/local_job.h"
#include "optim/optimizer.h"
#include "worker/client/kv_client.h"

namespace pshard::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void check_options(const KvBenchOptions& o) {
  if (o.servers < 1 || o.workers < 1 || o.model_mib < 1 || o.slice_kib < 1)
    throw Error("bench kv: --servers, --workers, --model-mib, --slice-kib must be >= 1");
}

// --rounds 0: enough rounds to move about 4 GiB per worker.
int64_t resolved_rounds(const KvBenchOptions& o) {
  return o.rounds > 0 ? o.rounds : std::max<int64_t>(4, 2048 / o.model_mib);
}

uint64_t slice_bytes_of(const KvBenchOptions& o) { return static_cast<uint64_t>(o.slice_kib) << 10; }

// The benchmark model: M MiB of float32 in tensors of at most 4 MiB, plus one 4 KiB tensor for latency.
std::vector<TensorSpec> bench_tensors(int64_t model_mib) {
  std::vector<TensorSpec> t;
  uint64_t left = static_cast<uint64_t>(model_mib) << 20;
  for (int i = 0; left > 0; ++i) {
    const uint64_t bytes = std::min<uint64_t>(left, 4u << 20);
    t.push_back({"layer" + std::to_string(i) + ".weight", bytes / sizeof(float)});
    left -= bytes;
  }
  t.push_back({"rtt4k", 1024});
  return t;
}

int64_t minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Raw TCP loopback: one connection streaming `bytes` from a pre-touched buffer; returns GB/s.
double tcp_baseline_gbps(uint64_t bytes) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  if (ls < 0) throw Error("tcp baseline: socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(ls, 1) != 0 ||
      getsockname(ls, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(ls);
    throw Error("tcp baseline: cannot listen on 127.0.0.1");
  }
  const size_t chunk = 1 << 20;
  double gbps = 0;
  std::thread reader([&] {
    int c = accept(ls, nullptr, nullptr);
    if (c < 0) return;
    std::vector<char> buf(chunk, 1);
    uint64_t got = 0;
    const auto t0 = Clock::now();
    while (got < bytes) {
      ssize_t n = recv(c, buf.data(), buf.size(), 0);
      if (n <= 0) break;
      got += static_cast<uint64_t>(n);
    }
    gbps = static_cast<double>(got) / seconds_since(t0) / 1e9;
    close(c);
  });
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0 || connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (s >= 0) close(s);
    close(ls);
    reader.join();
    throw Error("tcp baseline: cannot connect to 127.0.0.1");
  }
  std::vector<char> buf(chunk, 2);
  uint64_t sent = 0;
  while (sent < bytes) {
    ssize_t n = send(s, buf.data(), std::min<uint64_t>(chunk, bytes - sent), MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<uint64_t>(n);
  }
  close(s);
  reader.join();
  close(ls);
  return gbps;
}

// The bare ZeroMQ round trip pshard's 4 KiB push_pull is compared with: this process's DEALER sends 4 KiB to a ROUTER
// in a child process (`pshard bench kv --zmq-echo`, run_zmq_echo) that sends it straight back; no pshard code on
// either side. Returns the p50 in microseconds after 100 warm-up round trips.
double zmq_pingpong_p50_us(const std::string& exe, int64_t iters, const LocalJob::Options& jo) {
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(pick_free_ports(1)[0]);
  LocalJob echo(jo);
  ChildSpec c;
  c.name = "zmq echo";
  c.argv = {exe, "bench", "kv", "--zmq-echo", endpoint};
  echo.add(c);
  echo.start();
  std::vector<double> rtt;
  std::string failure;
  {
    zmq::context_t ctx(1);
    zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::rcvtimeo, 10000);
    dealer.connect(endpoint);
    std::vector<char> payload(4096, 1);
    for (int64_t i = -100; i < iters && failure.empty(); ++i) {
      const auto s = Clock::now();
      dealer.send(zmq::buffer(payload), zmq::send_flags::none);
      zmq::message_t back;
      if (!dealer.recv(back) || back.size() != payload.size()) failure = "no 4 KiB echo within 10 s";
      if (i >= 0) rtt.push_back(seconds_since(s) * 1e6);
    }
    dealer.send(zmq::message_t(), zmq::send_flags::dontwait);  // an empty frame: the echo process exits
  }
  echo.stop("ping-pong finished");
  echo.wait();
  if (!failure.empty() || rtt.empty()) throw Error("bench kv: bare ZeroMQ ping-pong: " + failure);
  std::sort(rtt.begin(), rtt.end());
  return rtt[rtt.size() / 2];
}

// The throughputs are medians of several measurements (kBlocks blocks of rounds, kTcpStreams raw TCP streams):
// on the shared 2-core VM one TCP stream's speed depends on where the scheduler puts its two threads and moves
// between 2.4 and 5.4 GB/s from one stream to the next, so a single stream made the ratio swing by +-30 %.
constexpr int64_t kBlocks = 8;
constexpr int kTcpStreams = 5;

struct Spread {
  double median = 0, min = 0, max = 0;
};
// One thread's memcpy of `bytes` (already-touched buffers), best of 5: the memory speed the servers' sum and update
// are held against.
double memcpy_gbps_of(size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::max(best, static_cast<double>(bytes) / seconds_since(t0) / 1e9);
    a[i] = b[bytes - 1 - static_cast<size_t>(i)];  // keep the copies observable
  }
  return best;
}

// Asks every server to shut down (so that each writes its statistics), as a client of the job; false when they did
// not take it.
bool shut_down_servers(const std::vector<std::string>& endpoints, const std::string& token, const std::string& key_dir,
                       int64_t model_mib, uint64_t slice_bytes) {
  KvClientOptions o;
  o.servers = endpoints;
  o.tensors = bench_tensors(model_mib);
  o.slice_bytes = slice_bytes;
  o.job_token = token;
  o.curve = key_dir.empty() ? transport::CurveKeys{} : transport::read_curve_keys(key_dir);
  o.request_timeout = std::chrono::milliseconds(10000);
  try {
    KvClient kv(o);
    kv.wait(kv.shutdown_servers());
    return true;
  } catch (const Error& e) {
    PSHARD_LOG(kWarn) << "bench kv: the servers did not take the shutdown (" << e.what()
                      << "); they are stopped without their statistics";
    return false;
  }
}

Spread spread_of(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

int64_t peak_rss_kib(int64_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return -1;
}

}  // namespace

int run_zmq_echo(const std::string& endpoint) {
  zmq::context_t ctx(1);
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::rcvtimeo, 10000);  // the parent is gone or done: never wait longer
  router.bind(endpoint);
  for (;;) {
    zmq::message_t identity, payload;
    if (!router.recv(identity) || !identity.more() || !router.recv(payload)) return 0;
    if (payload.size() == 0) return 0;
    router.send(identity, zmq::send_flags::sndmore);
    router.send(payload, zmq::send_flags::none);
  }
}

int run_kv_bench_worker(const KvBenchWorkerOptions& options) {
  const KvBenchOptions& b = options.bench;
  check_options(b);
  const int64_t rounds = resolved_rounds(b), rtt_iters = b.rtt_iters;
  const uint32_t rank = options.rank;
  log::configure("bench worker " + std::to_string(rank), log::Level::kWarn);
  const transport::CurveKeys curve =
      options.key_dir.empty() ? transport::CurveKeys{} : transport::read_curve_keys(options.key_dir);

  transport::retain_freed_memory();
  KvClientOptions o;
  o.rank = rank;
  o.servers = options.endpoints;
  o.tensors = bench_tensors(b.model_mib);
  o.slice_bytes = slice_bytes_of(b);
  const char* token = std::getenv("PSHARD_JOB_TOKEN");
  o.job_token = token ? token : "";
  o.curve = curve;
  o.transport = transport::parse_payload_transport(b.transport);
  o.request_timeout = std::chrono::milliseconds(120000);
  KvClient kv(o);
  const auto& tensors = o.tensors;
  std::vector<std::vector<float>> w(tensors.size()), g(tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t) {
    w[t].assign(tensors[t].numel, 0.5f);
    g[t].assign(tensors[t].numel, 1e-6f);
  }
  std::vector<KvClient::Handle> hs;
  if (rank == 0) {
    for (size_t t = 0; t < tensors.size(); ++t) hs.push_back(kv.init(tensors[t].name, w[t].data(), w[t].size()));
    for (auto h : hs) kv.wait(h);
  }
  hs.clear();
  for (size_t t = 0; t < tensors.size(); ++t) hs.push_back(kv.zpull(tensors[t].name, w[t].data(), w[t].size(), 0));
  for (auto h : hs) kv.wait(h);
  const size_t big = tensors.size() - 1;  // the last tensor is the 4 KiB one
  int64_t step = 0;
  auto round = [&] {
    hs.clear();
    for (size_t t = 0; t < big; ++t) {
      hs.push_back(kv.zpush_pull(tensors[t].name, g[t].data(), w[t].data(), w[t].size(), step));
    }
    hs.push_back(kv.zpush_pull("rtt4k", g[big].data(), w[big].data(), w[big].size(), step));
    for (auto h : hs) kv.wait(h);
    ++step;
  };
  round();  // warm-up: every buffer touched once
  uint64_t model_bytes = 0;
  for (size_t t = 0; t < big; ++t) model_bytes += tensors[t].numel * sizeof(float);
  const int64_t faults0 = minor_faults();
  Json block_bytes = Json::array(), block_seconds = Json::array();
  double elapsed = 0;
  for (int64_t b = 0; b < kBlocks; ++b) {
    const int64_t n = rounds * (b + 1) / kBlocks - rounds * b / kBlocks;
    if (n == 0) continue;
    const auto t0 = Clock::now();
    for (int64_t r = 0; r < n; ++r) round();
    const double s = seconds_since(t0);
    elapsed += s;
    block_bytes.push(static_cast<uint64_t>(n) * 2 * model_bytes);
    block_seconds.push(s);
  }
  const int64_t faults = minor_faults() - faults0;

  std::vector<double> rtt;
  rtt.reserve(static_cast<size_t>(std::max<int64_t>(rtt_iters, 0)));
  for (int64_t i = 0; i < rtt_iters; ++i) {
    const auto s = Clock::now();
    kv.wait(kv.zpush_pull("rtt4k", g[big].data(), w[big].data(), w[big].size(), step++));
    rtt.push_back(seconds_since(s) * 1e6);
  }
  std::sort(rtt.begin(), rtt.end());
  auto pct = [&](double q) { return rtt.empty() ? 0.0 : rtt[std::min(rtt.size() - 1, size_t(q * rtt.size()))]; };
  Json j = Json::object();
  j.set("rank", rank)
      .set("bytes", static_cast<uint64_t>(rounds) * 2 * model_bytes)
      .set("seconds", elapsed)
      .set("block_bytes", block_bytes)
      .set("block_seconds", block_seconds)
      .set("minor_faults_per_round", rounds > 0 ? static_cast<double>(faults) / rounds : 0.0)
      .set("shm_bytes", kv.traffic().shm_bytes_sent + kv.traffic().shm_bytes_recv)
      .set("socket_bytes", kv.traffic().bytes_sent + kv.traffic().bytes_recv)
      .set("rtt_p50_us", pct(0.5))
      .set("rtt_p99_us", pct(0.99));
  std::ofstream(options.result_path) << j.dump() << "\n";
  return 0;
}

Json run_kv_bench(const KvBenchOptions& options) {
  check_options(options);
  const int64_t S = options.servers, W = options.workers, M = options.model_mib, K = options.slice_kib;
  const int64_t rounds = resolved_rounds(options);
  const uint64_t slice_bytes = slice_bytes_of(options);
  log::configure("bench kv", log::Level::kWarn);

  const std::string exe = self_executable();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pshard-bench-kv-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string config = (dir / "bench.toml").string();
  std::ofstream(config) << "[cluster]\nmode = \"sync\"\nslice_bytes = " << slice_bytes
                        << "\nserver_threads = " << options.server_threads << "\ntransport = \"" << options.transport
                        << "\"\n[optimizer]\nname = \"" << options.optimizer
                        << "\"\nlr = 0.001\n[log]\nlevel = \"warn\"\n[security]\ncurve = "
                        << (options.curve ? "true" : "false") << "\n";
  const std::string key_dir = (dir / "keys").string();
  std::string worker_key_dir;  // "": plaintext
  if (options.curve) {
    transport::ensure_curve_keys(key_dir);
    worker_key_dir = key_dir;
  }
  JobPlan plan;  // standalone servers (no coordinator): the benchmark hands out the endpoints itself
  plan.executable = exe;
  plan.config_path = config;
  plan.key_dir = worker_key_dir;
  plan.job_token = new_job_token();
  plan.num_servers = static_cast<uint32_t>(S);
  plan.num_workers = static_cast<uint32_t>(W);
  plan.run_dir = dir.string();  // standalone servers leave server-R.stats.json there at a clean shutdown
  std::vector<int> ports = pick_free_ports(static_cast<int>(S));
  std::vector<std::string> endpoints;
  LocalJob::Options jo;
  jo.out_fd = 2;  // children's lines never mix with --json on stdout
  jo.grace = std::chrono::milliseconds(2000);
  LocalJob servers(jo);
  for (int64_t s = 0; s < S; ++s) {
    endpoints.push_back("tcp://127.0.0.1:" + std::to_string(ports[static_cast<size_t>(s)]));
    servers.add(plan.server_process(s, endpoints.back()));
  }
  servers.start();
  std::string joined;
  for (const auto& e : endpoints) joined += (joined.empty() ? "" : ",") + e;
  LocalJob workers(jo);
  for (int64_t w = 0; w < W; ++w) {
    // The benchmark's own workers (`pshard bench kv --worker-rank`, run_kv_bench_worker), not `pshard worker`.
    ChildSpec c;
    c.name = "worker " + std::to_string(w);
    c.role = NodeRole::kWorker;
    c.argv = {exe,
              "bench",
              "kv",
              "--worker-rank",
              std::to_string(w),
              "--endpoints",
              joined,
              "--servers",
              std::to_string(S),
              "--workers",
              std::to_string(W),
              "--model-mib",
              std::to_string(M),
              "--slice-kib",
              std::to_string(K),
              "--rounds",
              std::to_string(rounds),
              "--rtt-iters",
              std::to_string(options.rtt_iters),
              "--result",
              (dir / ("worker" + std::to_string(w) + ".json")).string(),
              "--key-dir",
              worker_key_dir,
              "--transport",
              options.transport};
    c.env = plan.node_env(-1);
    workers.add(c);
  }
  LocalJob::Result wr = workers.run();
  std::vector<int64_t> rss_kib;
  for (int64_t pid : servers.pids()) rss_kib.push_back(peak_rss_kib(pid));
  bool shut_down = false;
  if (wr.exit_code == 0 && shut_down_servers(endpoints, plan.job_token, worker_key_dir, M, slice_bytes)) {
    shut_down = servers.wait_for(std::chrono::seconds(10)).has_value();  // each writes its statistics, then exits
  }
  if (!shut_down) {
    servers.stop("benchmark finished");
    servers.wait();
  }
  // The servers' own figures: how fast they summed and updated, per thread-second of that work.
  double grad_bytes = 0, update_s = 0;
  for (int64_t s = 0; s < S; ++s) {
    const std::string path = (dir / ("server-" + std::to_string(s) + ".stats.json")).string();
    std::ifstream f(path);
    std::string line;
    if (!std::getline(f, line)) continue;
    const Json st = Json::parse(line, path);
    grad_bytes += st.at("bytes_received").as_number() + st.at("shm_bytes_received").as_number();
    update_s += st.at("aggregate_s").as_number() + st.at("update_s").as_number();
  }
  const double memcpy_gbps = memcpy_gbps_of(static_cast<size_t>(M) << 20);
  if (wr.exit_code != 0) {
    std::filesystem::remove_all(dir);
    throw Error("bench kv: " + wr.failure);
  }

  double faults = 0, p50 = 0, p99 = 0, shm_total = 0, socket_total = 0;
  uint64_t total_bytes = 0;
  std::vector<double> block_bytes, block_seconds;  // per block: summed over workers, the slowest worker's
  for (int64_t w = 0; w < W; ++w) {
    std::ifstream f(dir / ("worker" + std::to_string(w) + ".json"));
    std::string line;
    std::getline(f, line);
    Json j = Json::parse(line, "bench worker " + std::to_string(w));
    total_bytes += static_cast<uint64_t>(j.at("bytes").as_number());
    const std::vector<Json>& bytes = j.at("block_bytes").elements();
    const std::vector<Json>& seconds = j.at("block_seconds").elements();
    block_bytes.resize(bytes.size(), 0.0);
    block_seconds.resize(bytes.size(), 0.0);
    for (size_t b = 0; b < bytes.size() && b < seconds.size(); ++b) {
      block_bytes[b] += bytes[b].as_number();
      block_seconds[b] = std::max(block_seconds[b], seconds[b].as_number());
    }
    faults = std::max(faults, j.at("minor_faults_per_round").as_number());
    shm_total += j.at("shm_bytes").as_number();
    socket_total += j.at("socket_bytes").as_number();
    if (w == 0) {
      p50 = j.at("rtt_p50_us").as_number();
      p99 = j.at("rtt_p99_us").as_number();
    }
  }
  std::filesystem::remove_all(dir);
  std::vector<double> kv_blocks, tcp_streams;
  for (size_t b = 0; b < block_bytes.size(); ++b) kv_blocks.push_back(block_bytes[b] / block_seconds[b] / 1e9);
  // The same bytes in all: each stream carries the share of one of kTcpStreams.
  for (int i = 0; i < kTcpStreams; ++i) tcp_streams.push_back(tcp_baseline_gbps(total_bytes / kTcpStreams));
  const Spread kv = spread_of(kv_blocks), tcp = spread_of(tcp_streams);
  const double zmq_p50 = options.rtt_iters > 0 ? zmq_pingpong_p50_us(exe, options.rtt_iters, jo) : 0.0;

  // Memory bound per server: 1.25 x (weights + optimizer state + one aggregation buffer) + 100 MiB.
  optim::OptimizerParams op;
  op.name = options.optimizer;
  const double state_floats = static_cast<double>(optim::make_optimizer(op)->state_floats());
  SliceLayout layout(bench_tensors(M), slice_bytes, static_cast<uint32_t>(S));
  Json rss = Json::array(), bound = Json::array();
  bool within = true;
  for (int64_t s = 0; s < S; ++s) {
    const double held = static_cast<double>(layout.bytes_on_server(static_cast<uint32_t>(s))) / (1 << 20);
    const double b = 1.25 * held * (1.0 + state_floats + 1.0) + 100.0;
    const double r = static_cast<double>(rss_kib[static_cast<size_t>(s)]) / 1024.0;
    rss.push(r);
    bound.push(b);
    within = within && r <= b;
  }
  Json out = Json::object();
  out.set("servers", S)
      .set("workers", W)
      .set("model_mib", M)
      .set("slice_kib", K)
      .set("optimizer", options.optimizer)
      .set("curve", options.curve)
      .set("transport", options.transport)
      .set("shm_bytes_fraction", shm_total + socket_total > 0 ? shm_total / (shm_total + socket_total) : 0.0)
      .set("rounds", rounds)
      .set("push_pull_gbps", kv.median)
      .set("push_pull_gbps_min", kv.min)
      .set("push_pull_gbps_max", kv.max)
      .set("tcp_baseline_gbps", tcp.median)
      .set("tcp_baseline_gbps_min", tcp.min)
      .set("tcp_baseline_gbps_max", tcp.max)
      .set("ratio", kv.median / tcp.median)
      .set("server_update_gbps", update_s > 0 ? Json(grad_bytes / update_s / 1e9) : Json())
      .set("memcpy_gbps", memcpy_gbps)
      .set("server_update_to_memcpy", update_s > 0 ? Json(grad_bytes / update_s / 1e9 / memcpy_gbps) : Json())
      .set("rtt_4k_us_p50", p50)
      .set("rtt_4k_us_p99", p99)
      .set("rtt_4k_zmq_us_p50", zmq_p50)
      .set("rtt_ratio", zmq_p50 > 0 ? Json(p50 / zmq_p50) : Json())
      .set("worker_minor_faults_per_round", faults)
      .set("server_peak_rss_mib", rss)
      .set("server_rss_bound_mib", bound)
      .set("server_rss_within_bound", within);
  return out;
}

std::string format_kv_bench(const Json& r) {
  std::string text;
  appendf(text, "pshard bench kv: %lld server(s), %lld worker(s), %lld MiB model, %lld KiB slices, %s, %lld rounds%s\n",
          static_cast<long long>(r.at("servers").as_int()), static_cast<long long>(r.at("workers").as_int()),
          static_cast<long long>(r.at("model_mib").as_int()), static_cast<long long>(r.at("slice_kib").as_int()),
          r.at("optimizer").as_string().c_str(), static_cast<long long>(r.at("rounds").as_int()),
          r.at("curve").as_bool() ? ", CurveZMQ" : "");
  appendf(text, "  transport      %s (%.1f %% of the payload bytes through shared memory)\n",
          r.at("transport").as_string().c_str(), 100.0 * r.at("shm_bytes_fraction").as_number());
  appendf(text, "  push+pull      %.3f GB/s (median of %lld blocks of rounds; %.3f-%.3f)\n",
          r.at("push_pull_gbps").as_number(),
          static_cast<long long>(std::min<int64_t>(kBlocks, r.at("rounds").as_int())),
          r.at("push_pull_gbps_min").as_number(), r.at("push_pull_gbps_max").as_number());
  appendf(text, "  tcp loopback   %.3f GB/s (median of %d streams; %.3f-%.3f)\n  ratio          %.3f\n",
          r.at("tcp_baseline_gbps").as_number(), kTcpStreams, r.at("tcp_baseline_gbps_min").as_number(),
          r.at("tcp_baseline_gbps_max").as_number(), r.at("ratio").as_number());
  if (r.at("server_update_gbps").is_number()) {
    appendf(text, "  server sum+update %.3f GB/s of gradients per thread, memcpy %.3f GB/s (one thread): %.2f\n",
            r.at("server_update_gbps").as_number(), r.at("memcpy_gbps").as_number(),
            r.at("server_update_to_memcpy").as_number());
  }
  appendf(text, "  4 KiB push_pull round trip: p50 %.1f us, p99 %.1f us\n", r.at("rtt_4k_us_p50").as_number(),
          r.at("rtt_4k_us_p99").as_number());
  if (r.at("rtt_ratio").is_number()) {
    appendf(text, "  4 KiB bare ZeroMQ DEALER/ROUTER ping-pong: p50 %.1f us; rtt_ratio %.2f\n",
            r.at("rtt_4k_zmq_us_p50").as_number(), r.at("rtt_ratio").as_number());
  }
  appendf(text, "  worker minor page faults per round: %.0f\n", r.at("worker_minor_faults_per_round").as_number());
  const std::vector<Json>& rss = r.at("server_peak_rss_mib").elements();
  const std::vector<Json>& bound = r.at("server_rss_bound_mib").elements();
  for (size_t s = 0; s < rss.size() && s < bound.size(); ++s) {
    appendf(text, "  server %zu peak RSS %.1f MiB (bound %.1f MiB)\n", s, rss[s].as_number(), bound[s].as_number());
  }
  return text;
}

}  // namespace pshard::bench
