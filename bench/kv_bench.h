// `pshard bench kv`: push+pull GB/s, 4 KiB round trip and server peak RSS of a local job, against raw TCP.
//
//   KvBenchOptions o;
//   o.servers = 1; o.workers = 2; o.model_mib = 4; o.rounds = 5;
//   Json result = run_kv_bench(o);  // {"servers":1,...,"push_pull_gbps":1.4,"tcp_baseline_gbps":1.8,...}
//   std::fputs(format_kv_bench(result).c_str(), stdout);
//
// run_kv_bench starts S `pshard server` processes (launcher/job_plan.h, no coordinator) and W benchmark
// workers, `pshard bench kv --worker-rank R ...` child processes of the same executable, whose main is
// run_kv_bench_worker (a KvClient, worker/client/kv_client.h). docs/PERFORMANCE.md describes the numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/util/json.h"

namespace pshard::bench {

struct KvBenchOptions {
  int64_t servers = 1;             // server processes, >= 1
  int64_t workers = 1;             // worker processes, >= 1
  int64_t model_mib = 64;          // model size in MiB (float32 tensors of at most 4 MiB), >= 1
  int64_t slice_kib = 1024;        // cluster.slice_bytes in KiB, >= 1
  int64_t rounds = 0;              // measured rounds; <= 0: enough to move about 4 GiB per worker
  int64_t rtt_iters = 2000;        // sequential 4 KiB push_pulls for the latency percentiles
  std::string optimizer = "sgd";   // update rule on the servers (optim)
  int64_t server_threads = 2;      // cluster.server_threads
  bool curve = false;              // CurveZMQ on every socket (keys in a temporary 0700 directory)
  std::string transport = "auto";  // cluster.transport of servers and workers: auto and shm share memory (one host)
};

// Runs the benchmark (`transport` in the result, and which way the payloads went: shm_bytes_fraction): the servers,
// then the workers (BSP push_pull of every tensor per round, timed in up to 8 blocks of rounds), the servers' peak RSS,
// then 5 raw TCP loopback streams that carry the bytes the workers moved between them. Returns one JSON object:
// servers, workers, model_mib, slice_kib, optimizer, curve, rounds, push_pull_gbps (the median block),
// push_pull_gbps_min/max, tcp_baseline_gbps (the median stream), tcp_baseline_gbps_min/max, ratio (push_pull_gbps /
// tcp_baseline_gbps), rtt_4k_us_p50, rtt_4k_us_p99 (worker 0), rtt_4k_zmq_us_p50 (a bare ZeroMQ DEALER/ROUTER 4 KiB
// ping-pong between this process and an echo process, rtt_iters round trips after the workers finished), rtt_ratio
// (rtt_4k_us_p50 / rtt_4k_zmq_us_p50; null with rtt_iters 0), worker_minor_faults_per_round (the most of any worker),
// server_peak_rss_mib, server_rss_bound_mib (arrays, one per server), server_rss_within_bound, transport,
// shm_bytes_fraction, server_update_gbps (gradient bytes the servers summed and applied per second of their threads'
// aggregate and update phases), memcpy_gbps (one thread's memcpy of the model, in this process) and
// server_update_to_memcpy.
// Throws pshard::Error for bad options or when a process fails. Children's output goes to stderr.
Json run_kv_bench(const KvBenchOptions& options);

// One benchmark worker process (started by run_kv_bench).
struct KvBenchWorkerOptions {
  KvBenchOptions bench;                // model_mib, slice_kib, rounds and rtt_iters as the parent's
  uint32_t rank = 0;                   // worker 0 also sends the initial weights
  std::vector<std::string> endpoints;  // the servers, tcp://127.0.0.1:P, in rank order
  std::string result_path;             // where the worker's one JSON line goes
  std::string key_dir;                 // the benchmark's CurveZMQ key directory ("": plaintext)
};

// Connects to the servers, initializes (rank 0) and pulls every tensor, runs one warm-up round and
// `rounds` measured ones, then `rtt_iters` sequential 4 KiB push_pulls, and writes
// {"rank","bytes","seconds","block_bytes","block_seconds","minor_faults_per_round","rtt_p50_us","rtt_p99_us"} to
// result_path.
// Returns the exit code (0).
int run_kv_bench_worker(const KvBenchWorkerOptions& options);

// The echo side of the bare ZeroMQ ping-pong (`pshard bench kv --zmq-echo ENDPOINT`): a ROUTER bound to `endpoint`
// that sends every message back until an empty one, or 10 s without one. Returns the exit code (0).
int run_zmq_echo(const std::string& endpoint);

// The text report of a run_kv_bench result, as `pshard bench kv` prints it without --json:
//   pshard bench kv: 1 server(s), 2 worker(s), 4 MiB model, 1024 KiB slices, sgd, 5 rounds
//     push+pull      1.234 GB/s
//     ...
std::string format_kv_bench(const Json& result);

}  // namespace pshard::bench
