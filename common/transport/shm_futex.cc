// wait_while_equal / wake_all over the futex system call (not FUTEX_PRIVATE: the word is in a shared mapping).
#include "common/transport/shm_futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <ctime>

namespace pshard::transport {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex word is a plain 32-bit integer");

bool wait_while_equal(std::atomic<uint32_t>* word, uint32_t seen, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    if (word->load(std::memory_order_acquire) != seen) return true;
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return false;
    // At most 100 ms per call, so that a lost wake-up (a waker that died between its store and its wake) costs a
    // re-check, not the whole deadline.
    const auto ns = std::min<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(left).count(), 100000000);
    timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    const long rc = ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
    if (rc == 0 || errno == EAGAIN) return true;            // woken, or the word had changed
    if (errno != ETIMEDOUT && errno != EINTR) return true;  // let the caller re-check
  }
}

WaitResult wait_flagged(std::atomic<uint32_t>* word, uint32_t waited, bool (*ready)(uint32_t value, const void* arg),
                        const void* arg, std::chrono::steady_clock::time_point deadline,
                        const std::atomic<bool>* cancelled) {
  for (;;) {
    uint32_t seen = word->load(std::memory_order_acquire);
    if (ready(seen, arg)) return WaitResult::kReady;
    if (cancelled != nullptr && cancelled->load()) return WaitResult::kCancelled;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return WaitResult::kTimedOut;
    // Flagged before sleeping, so that the other side's exchange sees it; a change in between fails the
    // compare-exchange and is looked at again.
    if ((seen & waited) == 0) {
      if (!word->compare_exchange_weak(seen, seen | waited, std::memory_order_acq_rel)) continue;
      seen |= waited;
    }
    wait_while_equal(word, seen, std::min(deadline, now + std::chrono::milliseconds(50)));
  }
}

void wake_all(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace pshard::transport
