// PushSlot: the handshake over one push slot of a shared segment (shm_segment.h) between its one writer, a worker
// handing a gradient to a server on its host or to its host's leader, and its one reader, that server or leader.
//
// The writer waits until the slot is free, fills it and marks it full; the reader waits until it is full, uses the
// values and frees it. A side that must wait flags the slot's `busy` word as waited on and sleeps on it (a futex,
// shm_futex.h); the other side makes the wake-up system call only when that flag is set, so a handshake nobody waits
// on costs two atomic exchanges.
//
//   PushSlot slot(table.head(segment.data(), id));
//   if (slot.wait_free(deadline) != PushSlot::Wait::kReady) throw Error("the server has not used the last push");
//   slot.fill(grad, n, step);                                            // the writer
//   ...
//   if (slot.wait_full(deadline) == PushSlot::Wait::kReady) {            // the reader
//     use(slot.values(), slot.tag(), slot.first_non_finite());
//     slot.free();
//   }
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "common/transport/shm_futex.h"
#include "common/transport/shm_segment.h"

namespace pshard::transport {

class PushSlot {
 public:
  using Clock = std::chrono::steady_clock;
  using Wait = WaitResult;

  explicit PushSlot(SlotHead* head) : head_(head) {}

  // The writer: until the reader has freed the slot. Sleeps in steps of at most 50 ms and looks at `cancelled`
  // (nullptr: nothing cancels) between them.
  Wait wait_free(Clock::time_point deadline, const std::atomic<bool>* cancelled = nullptr) const;
  // The writer, once the slot is free: copies `n` values in (past this core's cache: another process reads them
  // next), notes the index of the first NaN or infinity (n: none), stores `tag` (a host's lanes: the step), marks the
  // slot full and wakes a waiting reader.
  void fill(const float* values, size_t n, uint64_t tag);

  // The reader: until the writer has filled the slot (as wait_free).
  Wait wait_full(Clock::time_point deadline, const std::atomic<bool>* cancelled = nullptr) const;
  bool full() const;
  const float* values() const { return SlotTable::values(head_); }
  // Both as fill() stored them; a server reads them once the push that names the slot has arrived.
  uint64_t tag() const { return head_->generation.load(std::memory_order_acquire); }
  uint64_t first_non_finite() const { return head_->first_non_finite.load(std::memory_order_acquire); }
  // The reader is done with the values: the writer may fill the slot again (a waiting writer is woken).
  void free();

 private:
  // `busy`: kFull while the values are the reader's; kWaited while a side sleeps on the word.
  static constexpr uint32_t kFull = 1;
  static constexpr uint32_t kWaited = 2;
  Wait wait_until(bool full, Clock::time_point deadline, const std::atomic<bool>* cancelled) const;
  SlotHead* head_;
};

}  // namespace pshard::transport
