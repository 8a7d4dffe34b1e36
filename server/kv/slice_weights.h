// A slice's weights, sent to pullers zero-copy and updated copy-on-write.
#pragma once

#include <cstddef>
#include <memory>
#include <zmq.hpp>

#include "common/compression/codec.h"
#include "common/transport/buffer_pool.h"

namespace pshard {

// Replies carry the weights without copying them: a reply frame holds a reference to the
// buffer until ZeroMQ has sent it. An update that finds such a reference still alive writes a
// fresh buffer (from the pool: recycled, already-touched memory) instead of changing bytes
// that are going out, so a pull never sees a half-applied step and never costs a copy of its
// own. Owned by the one thread that updates the slice; reply frames may die on any thread.
//
//   SliceWeights w(pool);
//   w.assign(initial, n);
//   zmq::message_t reply = w.frame();                   // zero-copy, holds a reference
//   optimizer.apply(w.writable(), grad, state, n, ...);  // copies first only if `reply` is unsent
//   zmq::message_t half = w.encoded_frame(Encoding::BF16);  // encoded once per update, shared by every reply
class SliceWeights {
 public:
  explicit SliceWeights(std::shared_ptr<transport::BufferPool> pool) : pool_(std::move(pool)) {}

  void assign(const float* values, size_t n);  // n floats into a buffer of their own
  size_t size() const { return n_; }
  const float* data() const;  // read-only view (owner thread)

  // The buffer to update in place: the current one when no reply holds it, else a copy.
  float* writable();
  // A zero-copy frame of the current weights; keeps them alive and unchanged until destroyed.
  zmq::message_t frame() const;
  // A zero-copy frame of the current weights in `encoding` (cluster.pull_precision): encoded at the first request
  // after each change of the weights and shared by the replies to every worker until the next change, so a sync
  // step encodes a slice once, not once per worker.
  zmq::message_t encoded_frame(compression::Encoding encoding);
  uint64_t copies() const { return copies_; }  // updates that had to copy (replies still in flight)
  // Counts the changes of the weights (assign() and writable()): a copy made elsewhere (the shared-memory slot of
  // the slice) is current while it holds the same generation.
  uint64_t generation() const { return generation_; }

 private:
  struct Buffer {
    zmq::message_t memory;  // pooled bytes: back to the pool when the last reference goes
  };
  static zmq::message_t share(const std::shared_ptr<Buffer>& buffer, size_t bytes);

  std::shared_ptr<transport::BufferPool> pool_;
  std::shared_ptr<Buffer> buf_;
  std::shared_ptr<Buffer> encoded_;  // buf_'s values as encoded_as_ (encoded_bytes_ long); reset by every change
  compression::Encoding encoded_as_ = compression::Encoding::NONE;
  size_t encoded_bytes_ = 0;
  size_t n_ = 0;
  uint64_t copies_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace pshard
