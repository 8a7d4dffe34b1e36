// The slices a server owns: layout and learning-rate schedule (from the first init or a checkpoint), and per slice
// its weights, optimizer state, version and consistency policy.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/checkpoint/checkpoint_file.h"
#include "common/keys/slice_layout.h"
#include "common/protocol/codec.h"
#include "common/transport/buffer_pool.h"
#include "server/consistency/consistency_policy.h"
#include "server/kv/server_options.h"
#include "server/kv/slice_requests.h"
#include "server/kv/slice_weights.h"

namespace pshard {

class SliceStore;

// Empty, unless `optimizer` takes layer-wise norms (lars, lamb) and `layout` cuts tensors into several slices: then
// the warning a server logs at init, naming those tensors and the cluster.slice_bytes that would keep them whole.
std::string layer_wise_slicing_warning(const optim::Optimizer& optimizer, const SliceLayout& layout);

// One slice of this server. Touched only by the thread that owns it (SliceStore::owner), so nothing in it locks.
class Slice final : public ConsistencySlice {
 public:
  Slice(SliceStore& store, uint32_t id, uint64_t length);

  // Worker 0's init: these length() floats, zero optimizer state, version 0.
  void init(const float* values);
  // A checkpoint's weights, optimizer state and versions.
  void restore(CheckpointSlice&& c);

  bool initialized() const override { return initialized_; }
  uint64_t length() const override { return length_; }
  int64_t version() const override { return version_; }
  void apply(const float* gradient, int64_t lr_step, uint32_t workers) override;
  void step_closed(StepRequests asked) override;
  std::string name() const override;

  const uint32_t id;  // global slice id in the layout
  SliceWeights weights;
  std::vector<float> opt_state;  // length() x the optimizer's state_floats()
  int64_t updates = 0;           // optimizer applications (Adam's t)
  std::unique_ptr<ConsistencyPolicy> policy;
  SliceRequests requests{*this};  // its requests, and the reads the policy has not let through yet
  struct TraceNames {             // "SLICE", "aggregate SLICE", "update SLICE", kept by the tracer (trace.steps)
    uint32_t slice = 0, aggregate = 0, update = 0;
  } trace_names;

 private:
  std::unique_ptr<ConsistencyPolicy> new_policy();
  void start(int64_t version, int64_t updates);

  SliceStore& store_;
  const uint64_t length_;
  bool initialized_ = false;
  int64_t version_ = 0;
};

// Written once, when the layout is installed (by the socket thread, or before any thread runs when restoring);
// afterwards each slice belongs to one thread: the socket thread for small slices (latency) and for every slice when
// there are no update threads, an update thread for the others.
//
//   SliceStore store(options, /*update_threads=*/2);
//   if (!store.install(init_message, code, why)) refuse(code, why);
//   Slice* s = store.slice(id);  // null: another server's slice
//   run_on(store.owner(id), [&] { finished = s->requests.run(req, key, thread); });
class SliceStore {
 public:
  SliceStore(const KvServerOptions& opt, int update_threads);  // keeps a reference to `opt`
  const KvServerOptions& options() const { return opt_; }

  // Worker 0's first init: the layout it describes, if it is the one this server was started for.
  bool install(const protocol::Message& init, protocol::ErrorCode& code, std::string& why);
  // Builds the layout, the learning-rate schedule (unless the options give one) and the uninitialised slices of
  // this server; false with the error reply's code and text when the tensor list or the schedule is unusable.
  bool install(std::vector<TensorSpec> tensors, uint64_t fingerprint, int64_t run_total_steps,
               protocol::ErrorCode& code, std::string& why);
  // True once install() succeeded; layout and slices never change again (an acquire: safe on any thread).
  bool installed() const { return installed_.load(std::memory_order_acquire); }

  const SliceLayout* layout() const { return layout_.get(); }  // null before install
  size_t size() const { return slices_.size(); }               // slices in the layout, this server's or not
  Slice* slice(uint32_t id) { return slices_[id].get(); }      // null for another server's slice
  int owner(uint32_t id) const { return owner_[id]; }          // -1: the socket thread, else an update thread
  // f(slice) for each slice of this server that thread `owner` owns (-1: the socket thread); none before install.
  template <class F>
  void for_each_owned(int owner, F&& f) {
    if (!installed()) return;
    for (uint32_t id = 0; id < slices_.size(); ++id) {
      if (slices_[id] && owner_[id] == owner) f(*slices_[id]);
    }
  }
  size_t local_slices() const { return local_slices_; }
  int64_t run_total_steps() const { return run_total_steps_; }  // from the init or the checkpoint
  int64_t max_version() const { return max_version_.load(std::memory_order_relaxed); }  // highest BSP step here
  uint64_t updates() const { return updates_; }                                         // optimizer applications
  uint64_t weight_copies() const { return weight_copies_; }  // updates that copied because a reply held the weights
  // The step boundary at which a push's stop flag stopped the job (checkpoint.on_sigterm): its slices checkpoint
  // there and every weights reply says so (stopAt); 0 while none did. Any thread.
  int64_t stop_at() const { return stop_at_.load(std::memory_order_acquire); }
  // The latest step boundary a push asked to checkpoint at (checkpoint.every_seconds), which every weights reply says
  // (checkpointAt); 0 while none did. Any thread.
  int64_t checkpoint_at() const { return checkpoint_at_.load(std::memory_order_acquire); }

  // Called on a slice's thread when it closed a BSP step; set before install.
  std::function<void(const Slice&, bool checkpoint_asked)> on_step_closed;

 private:
  friend class Slice;
  void raise_max_version(int64_t v);

  const KvServerOptions& opt_;
  const int update_threads_;
  std::function<float(int64_t step, uint32_t workers)> lr_at_;  // workers: those whose gradients the update holds
  std::shared_ptr<transport::BufferPool> pool_ = transport::BufferPool::create(size_t{1} << 30);
  std::unique_ptr<SliceLayout> layout_;
  std::vector<std::unique_ptr<Slice>> slices_;  // by global slice id
  std::vector<int> owner_;                      // by global slice id
  size_t local_slices_ = 0;
  int64_t run_total_steps_ = 0;
  std::atomic<bool> installed_{false};
  std::atomic<int64_t> max_version_{0};  // for pong: where a rejoining worker can start
  std::atomic<uint64_t> updates_{0}, weight_copies_{0};
  std::atomic<int64_t> stop_at_{0};
  std::atomic<int64_t> checkpoint_at_{0};
};

}  // namespace pshard
