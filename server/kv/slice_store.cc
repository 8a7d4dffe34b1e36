// SliceStore: layout and schedule install, and what happens to one slice's weights and optimizer state.
#include "server/kv/slice_store.h"

#include <algorithm>

#include "common/error.h"
#include "common/metrics/phase_clock.h"
#include "common/metrics/phases.h"
#include "common/metrics/trace.h"
#include "common/util/atomic_max.h"
#include "common/util/log.h"
#include "optim/lr_schedule.h"

namespace pshard {

using protocol::ErrorCode;

Slice::Slice(SliceStore& store, uint32_t id, uint64_t length)
    : id(id), weights(store.pool_), store_(store), length_(length) {
  // A policy from the start: a join the mode does not allow is refused as such before the slice has weights.
  policy = new_policy();
}

std::unique_ptr<ConsistencyPolicy> Slice::new_policy() {
  return make_consistency_policy({store_.opt_.mode, store_.opt_.num_workers, store_.opt_.staleness, store_.opt_.backup},
                                 *this);
}

void Slice::start(int64_t version, int64_t applied) {
  version_ = version;
  updates = applied;
  policy = new_policy();  // no push seen; SSP clocks start at the version
  initialized_ = true;
}

void Slice::init(const float* values) {
  weights.assign(values, length_);
  opt_state.assign(length_ * store_.opt_.optimizer->state_floats(), 0.0f);
  start(0, 0);
}

void Slice::restore(CheckpointSlice&& c) {
  weights.assign(c.weights.data(), c.weights.size());
  opt_state = std::move(c.opt_state);
  start(c.version, c.updates);
  store_.raise_max_version(c.version);
}

void Slice::apply(const float* gradient, int64_t lr_step, uint32_t workers) {
  ScopedPhase updating(ServerPhase::kUpdate);
  Tracer* tracer = store_.opt_.tracer.get();
  const auto t0 = tracer ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  ++updates;
  const uint64_t copies_before = weights.copies();
  const float lr = store_.lr_at_(lr_step, workers);
  weights.update([&](float* w) { store_.opt_.optimizer->apply(w, gradient, opt_state.data(), length_, lr, updates); });
  ++store_.updates_;
  store_.weight_copies_ += weights.copies() - copies_before;
  ++version_;
  if (tracer && tracer->traces(lr_step)) {
    tracer->span(TraceName{trace_names.update}, "server", t0, std::chrono::steady_clock::now(),
                 TraceArgs().set("step", lr_step).set("slice", TraceName{trace_names.slice}));
  }
}

void Slice::step_closed(StepRequests asked) {
  store_.raise_max_version(version_);
  if (asked.stop) {
    int64_t none = 0;  // the first stop holds: every slice closes the same step with it (stop_at())
    store_.stop_at_.compare_exchange_strong(none, version_, std::memory_order_acq_rel);
  }
  if (asked.checkpoint) raise_atomic(store_.checkpoint_at_, version_);
  if (store_.on_step_closed) store_.on_step_closed(*this, asked.checkpoint || asked.stop);
}

std::string Slice::name() const { return store_.layout_->describe(id); }

std::string layer_wise_slicing_warning(const optim::Optimizer& optimizer, const SliceLayout& layout) {
  if (!optimizer.layer_wise()) return "";
  std::string cut;
  uint64_t largest = 0;
  size_t count = 0;
  for (uint32_t t = 0; t < layout.tensors().size(); ++t) {
    const size_t slices = layout.slices_of(t).size();
    if (slices < 2) continue;
    const TensorSpec& spec = layout.tensors()[t];
    if (count++ < 3) cut += (cut.empty() ? "" : ", ") + spec.name + " (" + std::to_string(slices) + " slices)";
    largest = std::max<uint64_t>(largest, spec.numel * sizeof(float));
  }
  if (count == 0) return "";
  if (count > 3) cut += " and " + std::to_string(count - 3) + " more";
  return std::string("optimizer ") + optimizer.name() +
         " takes its trust ratio per layer, but cluster.slice_bytes = " + std::to_string(layout.slice_bytes()) +
         " cuts " + cut + ": their ratio is computed per slice, unlike in " +
         "pshard train; cluster.slice_bytes = " + std::to_string(largest) + " keeps every tensor whole";
}

SliceStore::SliceStore(const KvServerOptions& opt, int update_threads)
    : opt_(opt), update_threads_(std::max(update_threads, 0)) {
  if (opt.lr_at) lr_at_ = [f = opt.lr_at](int64_t step, uint32_t) { return f(step); };
}

void SliceStore::raise_max_version(int64_t v) { raise_atomic(max_version_, v, std::memory_order_relaxed); }

bool SliceStore::install(const protocol::Message& m, ErrorCode& code, std::string& why) {
  if (m.slice_bytes != opt_.slice_bytes || m.num_servers != opt_.num_servers) {
    code = ErrorCode::LAYOUT_MISMATCH;
    why = "init assumes slice_bytes " + std::to_string(m.slice_bytes) + " and " + std::to_string(m.num_servers) +
          " servers; this server has slice_bytes " + std::to_string(opt_.slice_bytes) + " and " +
          std::to_string(opt_.num_servers) + " servers";
    return false;
  }
  std::vector<TensorSpec> specs;
  for (const auto& t : m.tensors) specs.push_back({t.name, t.numel});
  return install(std::move(specs), m.layout_fingerprint, m.run_total_steps, code, why);
}

bool SliceStore::install(std::vector<TensorSpec> tensors, uint64_t fingerprint, int64_t total_steps, ErrorCode& code,
                         std::string& why) {
  std::unique_ptr<SliceLayout> l;
  try {
    l = std::make_unique<SliceLayout>(std::move(tensors), opt_.slice_bytes, opt_.num_servers);
  } catch (const Error& e) {
    code = ErrorCode::BAD_HEADER;
    why = std::string("init tensor list: ") + e.what();
    return false;
  }
  if (l->fingerprint() != fingerprint) {
    code = ErrorCode::LAYOUT_MISMATCH;
    why = "init's tensor list gives fingerprint " + std::to_string(l->fingerprint()) + ", the header says " +
          std::to_string(fingerprint);
    return false;
  }
  run_total_steps_ = total_steps;
  if (!lr_at_) {
    // The global batch (linear scaling rule) needs W, a cosine schedule the run's length: both known only now.
    const int64_t run_steps = total_steps > 0 ? total_steps : opt_.lr.shape.total_steps;
    if (opt_.lr.shape.name == "cosine" && run_steps <= 0) {
      code = ErrorCode::BAD_HEADER;
      why = "a cosine schedule needs the run's length: the init carries none and lr_schedule.total_steps is 0";
      return false;
    }
    try {
      // A schedule for each number of workers an update may hold (LrPolicy::batch_workers; one when the global
      // batch does not follow them).
      const optim::LrPolicy& lr = opt_.lr;
      const uint32_t counts = lr.global_batch == optim::GlobalBatch::kStepWorkers ? opt_.num_workers : 1;
      std::vector<std::shared_ptr<const optim::LrSchedule>> schedules;
      for (uint32_t n = 1; n <= counts; ++n) {
        schedules.push_back(
            std::make_shared<optim::LrSchedule>(lr.schedule(lr.batch_workers(opt_.num_workers, n), run_steps)));
      }
      lr_at_ = [schedules](int64_t step, uint32_t workers) {
        const size_t i = std::min<size_t>(std::max<uint32_t>(workers, 1), schedules.size()) - 1;
        return schedules[i]->lr_at(step);
      };
    } catch (const Error& e) {
      code = ErrorCode::BAD_HEADER;
      why = std::string("learning-rate schedule for a run of ") + std::to_string(total_steps) + " steps: " + e.what();
      return false;
    }
  }
  slices_.resize(l->slices().size());
  owner_.assign(l->slices().size(), -1);
  uint32_t local = 0;
  for (const SliceInfo& s : l->slices()) {
    const uint32_t id = static_cast<uint32_t>(&s - l->slices().data());
    if (s.server != opt_.rank) continue;
    slices_[id] = std::make_unique<Slice>(*this, id, s.length);
    if (Tracer* tracer = opt_.tracer.get()) {
      const std::string name = l->describe(id);
      slices_[id]->trace_names = {tracer->name(name).id, tracer->name("aggregate " + name).id,
                                  tracer->name("update " + name).id};
    }
    ++local_slices_;
    const bool inline_slice = update_threads_ == 0 || s.length * sizeof(float) <= opt_.inline_slice_bytes;
    owner_[id] = inline_slice ? -1 : static_cast<int>(local++ % update_threads_);
  }
  layout_ = std::move(l);
  if (opt_.rank == 0) {  // every server has the whole layout: one of them says it
    const std::string warning = layer_wise_slicing_warning(*opt_.optimizer, *layout_);
    if (!warning.empty()) PSHARD_LOG(kWarn) << "server 0: " << warning;
  }
  PSHARD_LOG(kInfo) << "server " << opt_.rank << ": layout of " << layout_->tensors().size() << " tensors, "
                    << layout_->slices().size() << " slices, " << layout_->bytes_on_server(opt_.rank)
                    << " bytes here (fingerprint " << layout_->fingerprint() << ")";
  installed_.store(true, std::memory_order_release);
  return true;
}

}  // namespace pshard
