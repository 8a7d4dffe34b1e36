// UpdateThreads: the queues, the loop of one update thread, and stop.
#include "server/kv/update_threads.h"

#include <exception>
#include <string>

#include "common/metrics/phases.h"
#include "common/util/log.h"
#include "common/util/signals.h"
#include "server/kv/slice_store.h"
#include "server/kv/step_deadlines.h"

namespace pshard {

void UpdateThreads::Queue::put(Task t) {
  {
    std::lock_guard<std::mutex> lock(mu);
    tasks.push_back(std::move(t));
  }
  cv.notify_one();
}

UpdateThreads::Task UpdateThreads::Queue::take(std::chrono::milliseconds wait) {
  Task t;
  std::unique_lock<std::mutex> lock(mu);
  cv.wait_for(lock, wait, [&] { return !tasks.empty(); });
  if (tasks.empty()) {
    t.kind = Task::kTick;
  } else {
    t = std::move(tasks.front());
    tasks.pop_front();
  }
  return t;
}

UpdateThreads::UpdateThreads(const Options& options, SliceStore& store, StallWatch& stalls, PhaseTotals& phases,
                             std::chrono::steady_clock::time_point started, Sink done)
    : opt_(options), store_(store), stalls_(stalls), phases_(phases), started_(started), done_(std::move(done)) {
  for (int i = 0; i < opt_.threads; ++i) queues_.push_back(std::make_unique<Queue>());
  for (int i = 0; i < opt_.threads; ++i) threads_.push_back(start_thread([this, i] { loop(i); }));
}

UpdateThreads::~UpdateThreads() { stop(); }

void UpdateThreads::run(int thread, RequestPtr req, size_t key) {
  queues_[thread]->put(Task{Task::kKey, std::move(req), key, 0});
}

void UpdateThreads::worker_dead(uint32_t rank) {
  for (auto& q : queues_) q->put(Task{Task::kWorkerDead, nullptr, 0, rank});
}

void UpdateThreads::stop() {
  if (threads_.empty()) return;
  for (auto& q : queues_) q->put(Task{Task::kStop, nullptr, 0, 0});
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void UpdateThreads::loop(int index) {
  Queue& q = *queues_[index];
  std::vector<char> dead(opt_.num_workers, 0);
  std::vector<float> scratch;
  const SliceThread here{dead, scratch, opt_.shm, opt_.tracer};
  StallTick tick;
  StepDeadlines deadlines;  // cluster.backup_workers
  PhaseClock clock(phases_, static_cast<size_t>(ServerPhase::kOther), started_);
  Tracer::name_this_thread(opt_.tracer, index + 1, "update thread " + std::to_string(index));
  auto done = [this](std::vector<RequestPtr> finished) {
    for (RequestPtr& r : finished) done_(std::move(r));
  };
  for (;;) {
    Task t;
    {
      ScopedPhase idle(ServerPhase::kIdle);
      t = q.take(deadlines.wait_for(std::chrono::steady_clock::now(), std::chrono::milliseconds(100)));
    }
    done(deadlines.close_due(std::chrono::steady_clock::now(), here));
    if (tick.due()) {
      const auto now = std::chrono::steady_clock::now();
      store_.for_each_owned(index, [&](Slice& s) { done(s.requests.check_stalls(stalls_, now, dead)); });
    }
    if (t.kind == Task::kTick) continue;
    if (t.kind == Task::kStop) return;
    try {
      if (t.kind == Task::kWorkerDead) {
        dead[t.rank] = 1;
        store_.for_each_owned(index, [&](Slice& s) {
          done(s.requests.worker_dead(t.rank, here));
          deadlines.watch(s);  // one fewer live worker: the quorum of backup workers may be there now
        });
        continue;
      }
      Slice& slice = *store_.slice(t.req->slice_ids[t.key]);
      done(slice.requests.run(t.req, t.key, here));
      deadlines.watch(slice);
    } catch (const std::exception& e) {
      PSHARD_LOG(kError) << "server " << opt_.server_rank << ": update failed: " << e.what();
      if (t.req) {
        t.req->fail(protocol::ErrorCode::INTERNAL, e.what());
        if (t.req->finish_key()) done_(std::move(t.req));
      }
    }
  }
}

}  // namespace pshard
