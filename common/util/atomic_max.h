// Raising an atomic to a value unless it holds more already: the "highest seen so far" of several threads.
#pragma once

#include <atomic>
#include <cstdint>

namespace pshard {

// Raises `a` to `v` unless it holds `v` or more; returns what it held before (>= v: nothing changed). Any thread.
inline int64_t raise_atomic(std::atomic<int64_t>& a, int64_t v, std::memory_order order = std::memory_order_acq_rel) {
  int64_t seen = a.load(order == std::memory_order_relaxed ? std::memory_order_relaxed : std::memory_order_acquire);
  while (seen < v && !a.compare_exchange_weak(seen, v, order)) {
  }
  return seen;
}

}  // namespace pshard
