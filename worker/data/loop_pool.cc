// LoopPool: helper threads waiting for the next loop, iterations handed out under one mutex.
#include "worker/data/loop_pool.h"

#include "common/error.h"
#include "common/util/signals.h"

namespace pshard::data {

LoopPool::LoopPool(int threads) {
  if (threads < 1) throw Error("LoopPool: threads must be >= 1, got " + std::to_string(threads));
  for (int k = 1; k < threads; ++k) helpers_.push_back(start_thread([this] { helper_loop(); }));
}

LoopPool::~LoopPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

void LoopPool::drain(std::unique_lock<std::mutex>& lk) {
  while (next_ < n_) {
    const int64_t i = next_++;
    const std::function<void(int64_t)>* body = body_;
    ++active_;
    lk.unlock();
    std::exception_ptr failed;
    try {
      (*body)(i);
    } catch (...) {
      failed = std::current_exception();
    }
    lk.lock();
    if (failed) {
      if (!error_) error_ = failed;
      next_ = n_;  // skip what is left
    }
    if (--active_ == 0 && next_ >= n_) done_cv_.notify_all();
  }
}

void LoopPool::helper_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    work_cv_.wait(lk, [this] { return stop_ || next_ < n_; });
    if (stop_) return;
    drain(lk);
  }
}

void LoopPool::run(int64_t n, const std::function<void(int64_t)>& body) {
  std::lock_guard<std::mutex> one_loop(run_mu_);
  std::unique_lock<std::mutex> lk(mu_);
  body_ = &body;
  n_ = n;
  next_ = 0;
  error_ = nullptr;
  work_cv_.notify_all();
  drain(lk);
  done_cv_.wait(lk, [this] { return active_ == 0; });
  body_ = nullptr;
  n_ = next_ = 0;
  std::exception_ptr failed = error_;
  error_ = nullptr;
  lk.unlock();
  if (failed) std::rethrow_exception(failed);
}

}  // namespace pshard::data
