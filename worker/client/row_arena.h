// A worker's row segment for one server, shared among its row requests in flight: each request's float32 rows get a
// region of it (first fit, lowest offset first, so that the pages in use stay few), freed when the server answered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace pshard {

// Offsets into a segment of `capacity` bytes. Thread-safe.
//
//   RowArena arena(64 << 20);
//   int64_t at = arena.allocate(rows * dim * sizeof(float));  // -1: no room (the request goes over TCP)
//   ...                                                        // the server answered
//   arena.release(at);
class RowArena {
 public:
  static constexpr size_t kAlign = 64;  // each region starts on a cache line
  explicit RowArena(size_t capacity) : capacity_(capacity) {}

  // The offset of a free region of `bytes`, or -1 when no gap holds it (or `bytes` is 0: there is nothing to place).
  int64_t allocate(size_t bytes);
  // Frees the region allocate() returned at `offset` (nothing for an offset that holds none).
  void release(int64_t offset);
  size_t in_use() const;  // bytes allocated, alignment included
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::map<size_t, size_t> used_;  // offset -> bytes (rounded up to kAlign)
};

// One request's region, released when the server has answered; a request that got no answer (a timeout, a closing
// client) keeps its region for good, since the server may still write there.
struct RowRegion {
  RowArena* arena = nullptr;
  int64_t offset = -1;
  uint8_t* data = nullptr;  // segment base + offset
  bool answered = false;
  RowRegion() = default;
  RowRegion(const RowRegion&) = delete;
  RowRegion& operator=(const RowRegion&) = delete;
  ~RowRegion() {
    if (answered && arena != nullptr) arena->release(offset);
  }
};

}  // namespace pshard
