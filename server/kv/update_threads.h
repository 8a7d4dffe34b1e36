// A server's update threads: each runs the requests of the slices it owns (SliceStore::owner) from a queue of its
// own, and hands the requests it finishes to a sink.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/metrics/phase_clock.h"
#include "common/metrics/trace.h"
#include "server/kv/request.h"
#include "server/kv/stall_watch.h"

namespace pshard {

class ShmHost;
class SliceStore;

// Each thread keeps its own view of the dead workers and its own scratch buffer, looks at its slices' waiting reads
// every StallTick, and counts its time in `phases` from `started` on. A request finishes on the thread that ran
// its last key: that thread calls `done` with it (the socket thread replies).
//
//   UpdateThreads updates({threads, rank, num_workers, shm, tracer}, store, stalls, phases, started,
//                         [&](RequestPtr r) { replies.put(std::move(r)); });
//   updates.run(store.owner(id), req, key);  // owner >= 0
//   updates.worker_dead(rank);
//   updates.stop();  // joins; the slices are no longer touched
class UpdateThreads {
 public:
  struct Options {
    int threads = 0;  // cluster.server_threads
    uint32_t server_rank = 0;
    uint32_t num_workers = 1;
    ShmHost* shm = nullptr;    // reads in shared memory (null: none)
    Tracer* tracer = nullptr;  // trace.steps (null: off)
  };
  using Sink = std::function<void(RequestPtr finished)>;  // called on an update thread

  // Starts the threads. `store`, `stalls`, `phases` and the sink's targets must outlive stop().
  UpdateThreads(const Options& options, SliceStore& store, StallWatch& stalls, PhaseTotals& phases,
                std::chrono::steady_clock::time_point started, Sink done);
  ~UpdateThreads();  // stop()
  UpdateThreads(const UpdateThreads&) = delete;
  UpdateThreads& operator=(const UpdateThreads&) = delete;

  // Key `key` of `req` on update thread `thread` (its slice's owner).
  void run(int thread, RequestPtr req, size_t key);
  // Worker `rank` is dead: every thread marks it and releases the reads that its slices held for it.
  void worker_dead(uint32_t rank);
  // Stops and joins every thread (after what is queued). Idempotent.
  void stop();

 private:
  struct Task {
    enum Kind { kKey, kWorkerDead, kStop, kTick } kind = kKey;  // kTick: none queued (the queue's wait timed out)
    RequestPtr req;
    size_t key = 0;
    uint32_t rank = 0;
  };
  struct Queue {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Task> tasks;
    void put(Task t);
    Task take(std::chrono::milliseconds wait);  // waits at most `wait`, then kTick
  };
  void loop(int index);

  const Options opt_;
  SliceStore& store_;
  StallWatch& stalls_;
  PhaseTotals& phases_;
  const std::chrono::steady_clock::time_point started_;
  const Sink done_;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::vector<std::thread> threads_;
};

}  // namespace pshard
