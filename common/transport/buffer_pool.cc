// BufferPool: size-keyed free lists of aligned buffers behind zmq_msg_init_data free callbacks.
#include "common/transport/buffer_pool.h"

#include <malloc.h>

#include <cstdlib>
#include <new>

#include "common/util/tsan.h"

namespace pshard::transport {
namespace {

struct Hint {
  std::shared_ptr<BufferPool> pool;
  size_t bytes;
};

}  // namespace

std::shared_ptr<BufferPool> BufferPool::create(size_t max_cached_bytes) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_cached_bytes));
}

BufferPool::~BufferPool() {
  for (auto& [size, list] : free_) {
    for (void* p : list) std::free(p);
  }
}

void* BufferPool::take(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(bytes);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cached_ -= bytes;
      return p;
    }
    ++allocations_;
  }
  const size_t rounded = ((bytes == 0 ? 1 : bytes) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void BufferPool::give_back(void* data, size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_ + bytes <= max_cached_) {
      free_[bytes].push_back(data);
      cached_ += bytes;
      return;
    }
  }
  std::free(data);
}

void BufferPool::free_fn(void* data, void* hint) {
  tsan_acquire(hint);  // often on ZeroMQ's I/O thread: see message()
  auto* h = static_cast<Hint*>(hint);
  h->pool->give_back(data, h->bytes);
  delete h;
}

zmq::message_t BufferPool::message(size_t bytes) {
  void* data = take(bytes);
  auto* hint = new Hint{shared_from_this(), bytes};
  tsan_release(hint);  // libzmq orders this with free_fn, out of TSan's sight (common/util/tsan.h)
  return zmq::message_t(data, bytes, &BufferPool::free_fn, hint);
}

size_t BufferPool::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_;
}

size_t BufferPool::allocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocations_;
}

void retain_freed_memory() {
  // Blocks up to 1 GiB come from the heap (not a fresh mmap each time) and the heap top is
  // trimmed only beyond 2 GiB free, so a steady stream of 1 MiB..64 MiB messages reuses pages.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 2147483647);
}

}  // namespace pshard::transport
