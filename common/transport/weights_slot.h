// WeightsSlot: one weights slot of a shared segment (shm_segment.h), written by its one writer (a server's optimizer,
// a host's leader publishing what came back) and copied by any number of readers on the host.
//
// A seqlock: `seq` is odd while the writer writes, and a reader retries until it read the same even value before and
// after its copy; `generation` says which version the slot holds. Each finished write also advances the `busy` word
// by two, so a reader may sleep on it (a futex) until a version arrives: a waiting reader sets the word's low bit
// first, and the writer makes the wake-up system call only when that bit is set.
//
//   WeightsSlot slot(table.head(segment.data(), id));
//   slot.write(weights, n, step + 1);                                             // the writer
//   if (slot.wait_for(step + 1, deadline) == WeightsSlot::Wait::kReady && slot.read(out, n)) use(out);   // a reader
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "common/transport/shm_futex.h"
#include "common/transport/shm_segment.h"

namespace pshard::transport {

class WeightsSlot {
 public:
  using Clock = std::chrono::steady_clock;
  using Wait = WaitResult;

  explicit WeightsSlot(SlotHead* head) : head_(head) {}

  // The writer: `n` values as version `generation` (copied past this core's cache: other processes read them next).
  void write(const float* values, size_t n, uint64_t generation);
  // The writer, in place: between the two the values (SlotTable::values) are the writer's and readers retry.
  void begin_write();
  void end_write(uint64_t generation);

  uint64_t generation() const { return head_->generation.load(std::memory_order_acquire); }
  // A reader: a whole version into `out`; false when none stayed stable for `tries` attempts (a writer that died in
  // the middle of a write).
  bool read(float* out, size_t n, int tries = 1 << 20) const;
  // A reader: until the slot holds version `generation` or a later one. Sleeps in steps of at most 50 ms and looks at
  // `cancelled` (nullptr: nothing cancels) between them.
  Wait wait_for(uint64_t generation, Clock::time_point deadline, const std::atomic<bool>* cancelled = nullptr) const;

 private:
  static constexpr uint32_t kWaited = 1;   // `busy`'s low bit: a reader sleeps on the word
  static constexpr uint32_t kVersion = 2;  // what each finished write adds to `busy`
  SlotHead* head_;
};

}  // namespace pshard::transport
