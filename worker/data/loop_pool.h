// A fixed pool of threads that, with the calling thread, runs the iterations of one parallel loop at a time.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pshard::data {

// The image decode threads: started once, reused for every batch, so a batch
// costs no thread start. run() hands iterations out one at a time (the
// images of a batch vary in cost), blocks until all have finished, and
// rethrows the first exception an iteration threw (the rest are skipped).
// Calls of run() from several threads take turns.
//
//   LoopPool pool(2);                          // the caller + 1 helper thread
//   pool.run(n, [&](int64_t i) { make_sample(indices[i], out + i * elems); });
class LoopPool {
 public:
  explicit LoopPool(int threads);  // threads >= 1 (the caller counts as one)
  ~LoopPool();
  LoopPool(const LoopPool&) = delete;
  LoopPool& operator=(const LoopPool&) = delete;

  void run(int64_t n, const std::function<void(int64_t)>& body);

 private:
  void helper_loop();
  // Runs iterations until none is left; called with lk held, returns with it held.
  void drain(std::unique_lock<std::mutex>& lk);

  std::mutex run_mu_;  // one loop at a time
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  const std::function<void(int64_t)>* body_ = nullptr;
  int64_t n_ = 0, next_ = 0;
  int active_ = 0;  // iterations being run now
  std::exception_ptr error_;
  bool stop_ = false;
  std::vector<std::thread> helpers_;
};

}  // namespace pshard::data
