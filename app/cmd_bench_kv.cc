// `pshard bench kv`: push+pull throughput, 4 KiB round-trip latency and server memory of a local job, against raw TCP
// (bench/kv_bench.h).
#include <cstdio>
#include <sstream>

#include "app/bench.h"
#include "bench/kv_bench.h"
#include "common/transport/shm_channel.h"
#include "common/util/args.h"

namespace pshard::app {
namespace {

int run_bench_kv(const std::vector<std::string>& args) {
  ArgParser p("pshard bench kv",
              "starts S server and W worker processes on 127.0.0.1, pushes and pulls an M MiB model repeatedly "
              "(BSP push_pull of every tensor per round) and reports push+pull GB/s (gradient bytes pushed plus "
              "weight bytes pulled per second, summed over workers), the p50/p99 round trip of a 4 KiB push_pull, "
              "a raw TCP loopback stream of the same bytes measured in the same run, their ratio, a bare ZeroMQ "
              "DEALER/ROUTER 4 KiB ping-pong between two processes in the same run (rtt_4k_zmq_us_p50) and "
              "pshard's round trip over it (rtt_ratio), and each server's peak RSS");
  p.add_option("servers", "S", "server processes", false, "1");
  p.add_option("workers", "W", "worker processes", false, "1");
  p.add_option("model-mib", "M", "model size in MiB (tensors of at most 4 MiB)", false, "64");
  p.add_option("slice-kib", "K", "cluster.slice_bytes in KiB", false, "1024");
  p.add_option("rounds", "N", "measured rounds (0: enough to move about 4 GiB per worker)", false, "0");
  p.add_option("rtt-iters", "N", "sequential 4 KiB push_pulls for the latency percentiles", false, "2000");
  p.add_option("optimizer", "NAME", "update rule on the servers", false, "sgd");
  p.add_option("server-threads", "N", "cluster.server_threads", false, "2");
  p.add_flag("curve", "CurveZMQ on every socket (security.curve; keys in a temporary 0700 directory)");
  p.add_option("transport", "T", "cluster.transport: auto, tcp or shm (auto and shm: through shared memory)", false,
               "auto");
  p.add_flag("json", "print one JSON object on stdout");
  // Internal: how the benchmark starts its own worker processes.
  p.add_option("worker-rank", "R", "(internal) run as benchmark worker R");
  p.add_option("endpoints", "LIST", "(internal) comma-separated server endpoints");
  p.add_option("result", "FILE", "(internal) where a worker writes its result");
  p.add_option("key-dir", "DIR", "(internal) the CurveZMQ key directory of the benchmark (\"\": plaintext)");
  p.add_option("zmq-echo", "ENDPOINT", "(internal) run the echo side of the bare ZeroMQ ping-pong");
  if (!p.parse(args)) return 0;
  if (p.has("zmq-echo")) return bench::run_zmq_echo(p.get("zmq-echo"));

  bench::KvBenchOptions o;
  o.servers = p.get_int("servers");
  o.workers = p.get_int("workers");
  o.model_mib = p.get_int("model-mib");
  o.slice_kib = p.get_int("slice-kib");
  o.rounds = p.get_int("rounds");
  o.rtt_iters = p.get_int("rtt-iters");
  o.optimizer = p.get("optimizer");
  o.server_threads = p.get_int("server-threads");
  o.curve = p.flag("curve");
  o.transport = p.get("transport");
  (void)transport::parse_payload_transport(o.transport);  // a bad value is refused before anything starts

  if (p.has("worker-rank")) {
    bench::KvBenchWorkerOptions w;
    w.bench = o;
    w.rank = static_cast<uint32_t>(p.get_int("worker-rank"));
    std::stringstream ss(p.get("endpoints"));
    for (std::string e; std::getline(ss, e, ',');) w.endpoints.push_back(e);
    w.result_path = p.get("result");
    w.key_dir = p.get("key-dir");
    return bench::run_kv_bench_worker(w);
  }
  const Json result = bench::run_kv_bench(o);
  if (p.flag("json")) {
    std::printf("%s\n", result.dump().c_str());
  } else {
    std::fputs(bench::format_kv_bench(result).c_str(), stdout);
  }
  return 0;
}

}  // namespace

PSHARD_BENCH(kv, "push+pull GB/s, 4 KiB round trip and server RSS of a local job vs raw TCP", run_bench_kv);

}  // namespace pshard::app
