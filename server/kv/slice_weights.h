// A slice's weights, sent to pullers zero-copy and updated copy-on-write, or kept in the server's shared-memory slot.
#pragma once

#include <cstddef>
#include <memory>
#include <zmq.hpp>

#include "common/compression/codec.h"
#include "common/transport/buffer_pool.h"
#include "common/transport/shm_segment.h"

namespace pshard {

// Replies carry the weights without copying them: a reply frame holds a reference to the
// buffer until ZeroMQ has sent it. An update that finds such a reference still alive writes a
// fresh buffer (from the pool: recycled, already-touched memory) instead of changing bytes
// that are going out, so a pull never sees a half-applied step and never costs a copy of its
// own. Owned by the one thread that updates the slice; reply frames may die on any thread.
//
// On a server with workers on its host (cluster.transport auto or shm) the weights live in the slice's slot of the
// server's shared-memory weights segment instead (home_in()): an update writes the slot in place under its seqlock,
// and the local workers copy the new weights out of it, with no copy on the server's side. A float32 frame for a
// worker on another host is then a copy of the slot, made once per update and shared by every such reply.
//
//   SliceWeights w(pool);
//   w.assign(initial, n);
//   zmq::message_t reply = w.frame();                   // zero-copy, holds a reference
//   w.update([&](float* v) { optimizer.apply(v, grad, state, n, ...); });  // copies first only if `reply` is unsent
//   zmq::message_t half = w.encoded_frame(Encoding::BF16);  // encoded once per update, shared by every reply
class SliceWeights {
 public:
  explicit SliceWeights(std::shared_ptr<transport::BufferPool> pool) : pool_(std::move(pool)) {}

  // From now on the weights live in `slot` (its values hold size() floats; see the class comment); the current
  // weights, if any, move into it. Before the slice's thread uses the slice (the layout's install).
  void home_in(transport::SlotHead* slot);
  bool homed() const { return slot_ != nullptr; }

  void assign(const float* values, size_t n);  // n floats into a buffer of their own (or the slot)
  size_t size() const { return n_; }
  const float* data() const;  // read-only view (owner thread); null before assign()

  // Changes the weights in place: f(float* values). Into a copy when a reply still holds the buffer; in the slot
  // under its seqlock when homed (local readers retry while f runs).
  template <class F>
  void update(F&& f) {
    float* values = begin_update();
    f(values);
    end_update();
  }
  // A zero-copy frame of the current weights; keeps them alive and unchanged until destroyed.
  zmq::message_t frame();
  // A zero-copy frame of the current weights in `encoding` (cluster.pull_precision): encoded at the first request
  // after each change of the weights and shared by the replies to every worker until the next change, so a sync
  // step encodes a slice once, not once per worker.
  zmq::message_t encoded_frame(compression::Encoding encoding);
  uint64_t copies() const { return copies_; }  // updates that had to copy (replies still in flight)
  // Counts the changes of the weights (assign() and update()): a copy made elsewhere (the shared-memory slot of
  // the slice) is current while it holds the same generation.
  uint64_t generation() const { return generation_; }

 private:
  struct Buffer {
    zmq::message_t memory;  // pooled bytes: back to the pool when the last reference goes
  };
  static zmq::message_t share(const std::shared_ptr<Buffer>& buffer, size_t bytes);
  float* begin_update();
  void end_update();

  std::shared_ptr<transport::BufferPool> pool_;
  std::shared_ptr<Buffer> buf_;  // the weights (null when homed)
  transport::SlotHead* slot_ = nullptr;
  bool assigned_ = false;
  std::shared_ptr<Buffer> encoded_;  // the values as encoded_as_ (encoded_bytes_ long); reset by every change
  compression::Encoding encoded_as_ = compression::Encoding::NONE;
  size_t encoded_bytes_ = 0;
  size_t n_ = 0;
  uint64_t copies_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace pshard
