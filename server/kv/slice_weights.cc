// SliceWeights: shared_ptr-counted pooled buffers behind zero-copy reply frames, or the slice's shared-memory slot.
#include "server/kv/slice_weights.h"

#include <atomic>
#include <cstring>

#include "common/transport/weights_slot.h"
#include "common/util/tsan.h"

namespace pshard {
namespace {

// On ZeroMQ's I/O thread once the reply is sent. The TSan annotations stand for what TSan
// cannot see: libzmq's hand-off of the frame (see frame()), and the acquire fence in begin_update()
// pairing with this reference's release.
void drop_reference(void*, void* hint) {
  tsan_acquire(hint);
  auto* ref = static_cast<std::shared_ptr<void>*>(hint);
  tsan_release(ref->get());
  delete ref;
}

}  // namespace

void SliceWeights::home_in(transport::SlotHead* slot) {
  slot_ = slot;
  encoded_.reset();
  if (buf_) {  // restored weights: into the slot; the buffer goes back to the pool
    transport::WeightsSlot(slot_).write(static_cast<const float*>(buf_->memory.data()), n_, ++generation_);
    buf_.reset();
  }
}

void SliceWeights::assign(const float* values, size_t n) {
  encoded_.reset();
  ++generation_;
  n_ = n;
  assigned_ = true;
  if (slot_) {
    transport::WeightsSlot(slot_).write(values, n, generation_);
    return;
  }
  auto fresh = std::make_shared<Buffer>();
  fresh->memory = pool_->message(n * sizeof(float));
  std::memcpy(fresh->memory.data(), values, n * sizeof(float));
  buf_ = std::move(fresh);
}

const float* SliceWeights::data() const {
  if (!assigned_) return nullptr;
  return slot_ ? transport::SlotTable::values(slot_) : static_cast<const float*>(buf_->memory.data());
}

float* SliceWeights::begin_update() {
  if (!assigned_) return nullptr;
  encoded_.reset();  // the caller changes the values (replies still holding the old encoding keep it)
  ++generation_;
  if (slot_) {
    transport::WeightsSlot(slot_).begin_write();
    return transport::SlotTable::values(slot_);
  }
  if (buf_.use_count() > 1) {
    // A reply is still being sent from this buffer: leave it to the reply and update a copy.
    auto fresh = std::make_shared<Buffer>();
    fresh->memory = pool_->message(n_ * sizeof(float));
    std::memcpy(fresh->memory.data(), buf_->memory.data(), n_ * sizeof(float));
    buf_ = std::move(fresh);
    ++copies_;
  } else {
    // The last reply dropped its reference on ZeroMQ's thread after reading the bytes; this
    // fence pairs with that release so our writes cannot be seen by (or race with) its reads.
    std::atomic_thread_fence(std::memory_order_acquire);
    tsan_acquire(buf_.get());  // the same ordering for TSan, which does not model fences
  }
  return static_cast<float*>(buf_->memory.data());
}

void SliceWeights::end_update() {
  if (slot_ && assigned_) transport::WeightsSlot(slot_).end_write(generation_);
}

zmq::message_t SliceWeights::share(const std::shared_ptr<Buffer>& buffer, size_t bytes) {
  auto* hint = new std::shared_ptr<void>(buffer);
  tsan_release(hint);  // libzmq orders this with drop_reference, out of TSan's sight
  return zmq::message_t(buffer->memory.data(), bytes, &drop_reference, hint);
}

zmq::message_t SliceWeights::frame() {
  if (slot_) return encoded_frame(compression::Encoding::NONE);  // a copy of the slot, once per update
  return share(buf_, n_ * sizeof(float));
}

zmq::message_t SliceWeights::encoded_frame(compression::Encoding encoding) {
  if (!encoded_ || encoded_as_ != encoding) {
    auto fresh = std::make_shared<Buffer>();
    if (encoding == compression::Encoding::NONE) {
      encoded_bytes_ = n_ * sizeof(float);
      fresh->memory = pool_->message(encoded_bytes_);
      std::memcpy(fresh->memory.data(), data(), encoded_bytes_);
    } else {
      std::unique_ptr<compression::Codec> codec = compression::make_codec({encoding});
      fresh->memory = pool_->message(codec->max_encoded_bytes(n_));
      encoded_bytes_ = codec->encode(data(), n_, static_cast<uint8_t*>(fresh->memory.data()));
    }
    encoded_ = std::move(fresh);
    encoded_as_ = encoding;
  }
  return share(encoded_, encoded_bytes_);
}

}  // namespace pshard
