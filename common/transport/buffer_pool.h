// A pool of reusable, already-touched byte buffers, handed to ZeroMQ as zero-copy message bodies.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>
#include <zmq.hpp>

namespace pshard::transport {

// Fresh memory costs a page fault per 4 KiB on first touch (~37 us each on small VMs), so
// buffers that are sent over and over (weights replies, copied pushes) come from here and go
// back when ZeroMQ has sent them. Thread-safe: ZeroMQ frees messages on its own I/O thread.
//
//   auto pool = BufferPool::create(/*max_cached_bytes=*/256 << 20);
//   zmq::message_t frame = pool->message(n * sizeof(float));   // memory from the pool
//   std::memcpy(frame.data(), weights, n * sizeof(float));
//   socket.send(frame, zmq::send_flags::none);                  // returns to the pool once sent
class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Buffers returned while more than max_cached_bytes are cached are freed instead.
  static std::shared_ptr<BufferPool> create(size_t max_cached_bytes);
  ~BufferPool();

  // A message of exactly `bytes` bytes (64-byte aligned) backed by a pooled buffer.
  zmq::message_t message(size_t bytes);
  size_t cached_bytes() const;
  size_t allocations() const;  // buffers ever allocated (not reused)

 private:
  explicit BufferPool(size_t max_cached_bytes) : max_cached_(max_cached_bytes) {}
  void* take(size_t bytes);
  void give_back(void* data, size_t bytes);
  static void free_fn(void* data, void* hint);

  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // size -> buffers
  size_t max_cached_;
  size_t cached_ = 0;
  size_t allocations_ = 0;
};

// Makes glibc keep freed large blocks for reuse instead of unmapping them, so that the
// per-message buffers ZeroMQ allocates on receive are recycled memory, not fresh pages.
// Call once at process start (server and worker processes).
void retain_freed_memory();

}  // namespace pshard::transport
