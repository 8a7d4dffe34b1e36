// RowArena: first-fit regions of a worker's row segment (row_arena.h).
#include "worker/client/row_arena.h"

namespace pshard {

int64_t RowArena::allocate(size_t bytes) {
  if (bytes == 0 || bytes > capacity_) return -1;
  const size_t need = (bytes + kAlign - 1) / kAlign * kAlign;
  std::lock_guard<std::mutex> lock(mu_);
  size_t at = 0;
  for (const auto& [offset, size] : used_) {
    if (offset - at >= need) break;
    at = offset + size;
  }
  if (at > capacity_ || capacity_ - at < need) return -1;
  used_.emplace(at, need);
  return static_cast<int64_t>(at);
}

void RowArena::release(int64_t offset) {
  if (offset < 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  used_.erase(static_cast<size_t>(offset));
}

size_t RowArena::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t bytes = 0;
  for (const auto& entry : used_) bytes += entry.second;
  return bytes;
}

}  // namespace pshard
