// EmbeddingShard: a table's rows on one server, made from the seed (hashed: on first touch) and updated row by row.
#include "optim/embedding_shard.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/error.h"
#include "common/util/bf16.h"

namespace pshard {

std::string table_rule_refusal(const optim::Optimizer& rule) {
  if (!rule.layer_wise()) return "";
  return std::string("the embedding tables' rule is ") + rule.name() +
         ", which takes norms over a whole layer; their rows are updated one by one: set embedding.optimizer to "
         "sgd, momentum, nesterov, adagrad, adadelta, rmsprop, adam, adamw or ftrl";
}

EmbeddingShard::EmbeddingShard(TableSpec spec, uint32_t server, uint32_t num_servers, uint64_t seed,
                               const optim::Optimizer& optimizer)
    : spec_(std::move(spec)),
      server_(server),
      num_servers_(num_servers),
      seed_(seed),
      local_rows_(table_rows_on(spec_.rows, num_servers, server)),
      state_per_row_(optimizer.state_floats() * spec_.dim),
      scratch_(spec_.dim) {
  if (spec_.hashed) return;  // rows come with their ids
  if (spec_.bf16) {
    half_.resize(local_rows_ * spec_.dim);
  } else {
    values_.resize(local_rows_ * spec_.dim);
  }
  state_.assign(local_rows_ * state_per_row_, 0.0f);
  for (uint64_t i = 0; i < local_rows_; ++i) {
    table_initial_row(spec_, seed, table_global_row(i, server_, num_servers_), scratch_.data());
    set_row(i, scratch_.data());
  }
}

void EmbeddingShard::grow_one_row() {
  if (spec_.bf16) {
    half_.resize(half_.size() + spec_.dim);
  } else {
    values_.resize(values_.size() + spec_.dim);
  }
  state_.resize(state_.size() + state_per_row_);
}

void EmbeddingShard::set_row(size_t place, const float* v) {
  const size_t dim = spec_.dim;
  if (spec_.bf16) {
    for (size_t j = 0; j < dim; ++j) half_[place * dim + j] = to_bf16(v[j]);
  } else {
    std::memcpy(values_.data() + place * dim, v, dim * sizeof(float));
  }
}

void EmbeddingShard::get_row(size_t place, float* out) const {
  const size_t dim = spec_.dim;
  if (spec_.bf16) {
    for (size_t j = 0; j < dim; ++j) out[j] = from_bf16(half_[place * dim + j]);
  } else {
    std::memcpy(out, values_.data() + place * dim, dim * sizeof(float));
  }
}

std::vector<float> EmbeddingShard::values_as_floats() const {
  if (!spec_.bf16) return values_;
  std::vector<float> out(half_.size());
  for (size_t i = 0; i < half_.size(); ++i) out[i] = from_bf16(half_[i]);
  return out;
}

void EmbeddingShard::restore(std::vector<float> values, std::vector<float> state) {
  if (spec_.bf16) {
    half_.resize(values.size());
    for (size_t i = 0; i < values.size(); ++i) half_[i] = to_bf16(values[i]);
  } else {
    values_ = std::move(values);
  }
  state_ = std::move(state);
}

int64_t EmbeddingShard::slot(uint64_t row) const {
  const auto it = slots_.find(row);
  return it == slots_.end() ? -1 : static_cast<int64_t>(it->second);
}

void EmbeddingShard::read(uint64_t row, float* out) const {
  if (!spec_.hashed) {
    get_row(local(row), out);
    return;
  }
  const int64_t s = slot(row);
  if (s >= 0) {
    get_row(static_cast<size_t>(s), out);
    return;
  }
  table_initial_row(spec_, seed_, row, out);  // what the row starts as, once admitted (as stored)
  if (spec_.bf16) {
    for (size_t j = 0; j < spec_.dim; ++j) out[j] = from_bf16(to_bf16(out[j]));
  }
}

int64_t EmbeddingShard::admit(uint64_t row, int64_t step) {
  int64_t s = slot(row);
  if (s >= 0) return s;
  uint32_t& seen = seen_[row];
  if (++seen < std::max<uint32_t>(spec_.admit_after, 1) || slots_.size() >= local_rows_) return -1;
  seen_.erase(row);
  if (!free_.empty()) {
    s = free_.back();
    free_.pop_back();
  } else {
    s = static_cast<int64_t>(slot_ids_.size());
    slot_ids_.push_back(0);
    last_step_.push_back(0);
    grow_one_row();
  }
  slot_ids_[s] = row;
  last_step_[s] = step;
  table_initial_row(spec_, seed_, row, scratch_.data());
  set_row(static_cast<size_t>(s), scratch_.data());
  std::fill_n(state_.begin() + static_cast<ptrdiff_t>(s * state_per_row_), state_per_row_, 0.0f);
  slots_[row] = static_cast<uint32_t>(s);
  ++counts_.admitted;
  counts_.held = slots_.size();
  return s;
}

void EmbeddingShard::apply(const uint64_t* rows, const float* grads, size_t n, const optim::Optimizer& optimizer,
                           float lr, int64_t t, int64_t step) {
  const size_t dim = spec_.dim;
  for (size_t i = 0; i < n; ++i) {
    int64_t place = static_cast<int64_t>(local(rows[i]));
    if (spec_.hashed) {
      place = admit(rows[i], step);
      if (place < 0) {
        ++counts_.not_admitted;
        continue;
      }
      last_step_[place] = step;
    }
    // The rule sees one row as n = dim elements with its state planes right after one another (state_floats x dim).
    float* values = spec_.bf16 ? scratch_.data() : values_.data() + place * dim;  // bf16: updated as float32
    if (spec_.bf16) get_row(static_cast<size_t>(place), values);
    optimizer.apply(values, grads + i * dim, state_.data() + place * state_per_row_, dim, lr, t);
    if (spec_.bf16) set_row(static_cast<size_t>(place), values);
  }
}

void EmbeddingShard::close_step(const uint64_t* rows, const float* grads, size_t n, const optim::Optimizer& optimizer,
                                float lr, int64_t step) {
  if (n > 0) apply(rows, grads, n, optimizer, lr, step + 1, step);
  const int64_t sweep_period = std::max<int64_t>(1, spec_.expire_after / 8);
  if (spec_.hashed && (step + 1) % sweep_period == 0) expire(step + 1);
}

void EmbeddingShard::expire(int64_t step) {
  if (!spec_.hashed || spec_.expire_after <= 0) return;
  for (size_t s = 0; s < slot_ids_.size(); ++s) {
    const auto it = slots_.find(slot_ids_[s]);
    if (it == slots_.end() || it->second != s || step - last_step_[s] <= spec_.expire_after) continue;
    slots_.erase(it);
    free_.push_back(static_cast<uint32_t>(s));
    ++counts_.expired;
  }
  counts_.held = slots_.size();
}

void EmbeddingShard::save_hashed(CheckpointTable& t) const {
  const size_t dim = spec_.dim;
  t.ids.clear();
  t.last_steps.clear();
  t.values.clear();
  t.state.clear();
  for (size_t s = 0; s < slot_ids_.size(); ++s) {
    const auto it = slots_.find(slot_ids_[s]);
    if (it == slots_.end() || it->second != s) continue;  // a free slot
    t.ids.push_back(slot_ids_[s]);
    t.last_steps.push_back(last_step_[s]);
    const size_t at = t.values.size();
    t.values.resize(at + dim);
    get_row(s, t.values.data() + at);
    t.state.insert(t.state.end(), state_.begin() + static_cast<ptrdiff_t>(s * state_per_row_),
                   state_.begin() + static_cast<ptrdiff_t>((s + 1) * state_per_row_));
  }
  t.pending.assign(seen_.begin(), seen_.end());
  std::sort(t.pending.begin(), t.pending.end());  // the same file for the same table
  t.admitted = counts_.admitted;
  t.expired = counts_.expired;
  t.not_admitted = counts_.not_admitted;
}

void EmbeddingShard::restore_hashed(CheckpointTable& t) {
  const size_t held = t.ids.size();
  if (held > local_rows_ || t.last_steps.size() != held || t.values.size() != held * spec_.dim ||
      t.state.size() != held * state_per_row_) {
    throw Error("embedding table " + describe_table(spec_) + ": the checkpoint holds " + std::to_string(held) +
                " rows for a capacity of " + std::to_string(local_rows_) + " on this server, with " +
                std::to_string(t.values.size()) + " values and " + std::to_string(t.state.size()) + " state floats");
  }
  slots_.clear();
  for (size_t s = 0; s < held; ++s) {
    if (!holds(t.ids[s]) || !slots_.emplace(t.ids[s], static_cast<uint32_t>(s)).second) {
      throw Error("embedding table " + describe_table(spec_) + ": the checkpoint's id " + std::to_string(t.ids[s]) +
                  " is repeated or belongs to another server");
    }
  }
  slot_ids_ = std::move(t.ids);
  last_step_ = std::move(t.last_steps);
  restore(std::move(t.values), std::move(t.state));
  free_.clear();
  seen_ = std::unordered_map<uint64_t, uint32_t>(t.pending.begin(), t.pending.end());
  counts_.admitted = t.admitted;
  counts_.expired = t.expired;
  counts_.not_admitted = t.not_admitted;
  counts_.held = slots_.size();
}

}  // namespace pshard
