// Waiting for a word of shared memory to change, across processes (Linux futex on a shared mapping).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace pshard::transport {

// Blocks while `*word` still holds `seen`, until another process (or thread) changes it and calls wake_all(word), or
// until `deadline`. Returns at once when the word already differs. False only when the deadline passed. Spurious
// returns happen: callers re-check their condition in a loop.
//
//   for (uint32_t b = head->busy.load(); b == 0; b = head->busy.load()) {
//     if (!wait_while_equal(&head->busy, b, deadline)) throw Error("timed out");
//   }
bool wait_while_equal(std::atomic<uint32_t>* word, uint32_t seen, std::chrono::steady_clock::time_point deadline);

// Wakes every process waiting on `word` (call after changing it).
void wake_all(std::atomic<uint32_t>* word);

// A wait on a word whose waiters flag themselves (transport::PushSlot, transport::WeightsSlot): before each sleep the
// waiter sets `waited` in the word, and whoever changes the word exchanges it and calls wake_all() only when the old
// value had `waited` set (wake_if_waited), so a change nobody waits for costs no system call.
enum class WaitResult { kReady, kTimedOut, kCancelled };

// Until `ready(value)` holds for the word's value (read with acquire before `ready` looks at anything else), or
// `deadline`. Sleeps in steps of at most 50 ms and looks at `cancelled` (nullptr: nothing cancels) between them.
WaitResult wait_flagged(std::atomic<uint32_t>* word, uint32_t waited, bool (*ready)(uint32_t value, const void* arg),
                        const void* arg, std::chrono::steady_clock::time_point deadline,
                        const std::atomic<bool>* cancelled);

// After a change that returned the word's `old` value: wakes its waiters when one flagged itself.
inline void wake_if_waited(std::atomic<uint32_t>* word, uint32_t old, uint32_t waited) {
  if ((old & waited) != 0) wake_all(word);
}

}  // namespace pshard::transport
