// Shared memory between the processes of one job on one host: anonymous segments (memfd) and the slot table that
// lays a server's slices out in them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/keys/slice_layout.h"

namespace pshard::transport {

// An anonymous shared-memory segment (memfd_create): it has no name in any file system, so nothing is left behind
// when its processes die, however they die; another process gets it only as a file descriptor passed over a Unix
// socket (shm_channel.h). Mapped read-write; moves, does not copy; unmaps and closes on destruction.
//
//   SharedSegment weights = SharedSegment::create("pshard server 0 weights", table.bytes());
//   pass_fd(weights.fd());                                      // to a worker on the same host
//   SharedSegment mine = SharedSegment::attach(fd, table.bytes(), "server 0's weights segment");
class SharedSegment {
 public:
  SharedSegment() = default;
  ~SharedSegment();
  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  // How a received segment is mapped: read and write (push slots, a host's lanes), or read only (a server's
  // weights, which its owner seals against other writers).
  enum class Access { kReadWrite, kReadOnly };

  // A new zero-filled segment of `bytes`, sealed against shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW: a
  // process it is passed to cannot truncate it under its owner, whose access would then fault); throws
  // pshard::Error naming `name` when the system refuses.
  static SharedSegment create(const std::string& name, size_t bytes);
  // Maps a segment received as `fd` (the new object owns it) when its size is exactly `expected_bytes` and it is
  // sealed against resizing: a truncated, oversized or resizable segment is refused with a pshard::Error naming
  // `what` (and both sizes), and nothing is mapped.
  static SharedSegment attach(int fd, size_t expected_bytes, const std::string& what,
                              Access access = Access::kReadWrite);
  // From now on no process can map the segment writable or write() it (F_SEAL_FUTURE_WRITE); this object's own
  // mapping stays writable. For a segment the owner alone writes and hands out to readers.
  void seal_against_other_writers();

  bool valid() const { return data_ != nullptr; }
  int fd() const { return fd_; }
  uint8_t* data() const { return static_cast<uint8_t*>(data_); }
  size_t size() const { return size_; }

 private:
  void reset();
  int fd_ = -1;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// The head of one slice's slot. Weights slots (a server's segment, a host's lane 0) are a seqlock written and read by
// transport::WeightsSlot (weights_slot.h): `seq` is odd while the writer writes; `generation` says which update of
// the slice the slot holds, so that it is written once per update whatever the number of readers; `busy` counts the
// writes, for readers waiting on a version. Push
// slots (a worker's segment, a host's lanes) are handed between their writer and reader by transport::PushSlot
// (push_slot.h) through `busy`, with `first_non_finite`: the index of the gradient's first NaN or infinity as the
// writer found it while copying (the slice's length: none), so that the server need not read the values once more to
// refuse a non-finite push, and `generation` as the writer's tag.
// std::atomic of 64 and 32 bits is lock-free and address-free on the platforms pshard builds for, so it works
// across processes.
struct alignas(64) SlotHead {
  std::atomic<uint64_t> seq{0};
  std::atomic<uint64_t> generation{0};
  std::atomic<uint32_t> busy{0};
  std::atomic<uint64_t> first_non_finite{0};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "shared-memory slots need lock-free atomics");

// Where each slice of one server lives in a segment: the server's slices in slice-id order, each a SlotHead and then
// its float32 values, 64-byte aligned. The server and every worker compute the same table from the same layout.
class SlotTable {
 public:
  SlotTable() = default;
  SlotTable(const SliceLayout& layout, uint32_t server);
  // Every slice of the layout (the lanes of a host's workers, worker/client/host_group.h).
  static SlotTable every_slice(const SliceLayout& layout);

  size_t bytes() const { return bytes_; }  // the segment's exact size
  size_t slots() const { return slots_; }  // slices of this server
  // The slot of global slice `id`; nullptr when another server owns it.
  SlotHead* head(uint8_t* base, uint32_t id) const;
  static float* values(SlotHead* head) { return reinterpret_cast<float*>(head + 1); }

 private:
  static constexpr uint32_t kEverySlice = ~0u;  // as `server`: every slice
  std::vector<int64_t> offset_;                 // per global slice id: its slot's offset, -1 when not this server's
  size_t bytes_ = 0;
  size_t slots_ = 0;
};

}  // namespace pshard::transport
