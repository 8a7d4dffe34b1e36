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

}  // namespace pshard::transport
