// One embedding table's rows on one server: their values and optimizer state, made from the run's seed, updated row
// by row (lazily: a row's state changes only in the steps that touch it).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "common/keys/table_layout.h"
#include "optim/optimizer.h"

namespace pshard {

// The rows of `spec` that server `server` of `num_servers` holds (table_layout.h: row r on server r mod S), each
// made by table_initial_row() when the shard is built. State: optimizer.state_floats() planes per row, kept beside
// the row (row i's state at state_row(i)), zero at the start.
//
//   EmbeddingShard shard(spec, /*server=*/1, /*num_servers=*/2, seed, *optimizer);
//   std::memcpy(out, shard.row(7), spec.dim * sizeof(float));    // row 7 lives on server 1 of 2
//   shard.apply(rows, grads, n, *optimizer, lr, /*t=*/step + 1);   // rows: global ids held here
class EmbeddingShard {
 public:
  EmbeddingShard(TableSpec spec, uint32_t server, uint32_t num_servers, uint64_t seed,
                 const optim::Optimizer& optimizer);

  const TableSpec& spec() const { return spec_; }
  uint64_t local_rows() const { return local_rows_; }
  // Whether global row `row` is in the table and held here.
  bool holds(uint64_t row) const { return row < spec_.rows && table_server(row, num_servers_) == server_; }
  // The values of global row `row` (held here): spec().dim floats.
  const float* row(uint64_t row) const { return values_.data() + local(row) * spec_.dim; }
  // One update of each of the n rows (global ids held here, no two equal) with its gradient (grads: n x dim, row
  // after row): the optimizer's rule on the row's values and state with learning rate `lr` and update count `t`.
  // Rows not listed keep their values and state.
  void apply(const uint64_t* rows, const float* grads, size_t n, const optim::Optimizer& optimizer, float lr,
             int64_t t);
  // Every row held here (local order, table_local_row) and their optimizer state: what a checkpoint keeps.
  const std::vector<float>& values() const { return values_; }
  const std::vector<float>& state() const { return state_; }
  // A checkpoint's rows and state in place of the ones made from the seed (sizes checked by the caller).
  void restore(std::vector<float> values, std::vector<float> state) {
    values_ = std::move(values);
    state_ = std::move(state);
  }
  // Bytes of values and optimizer state.
  uint64_t bytes() const { return (values_.size() + state_.size()) * sizeof(float); }

 private:
  uint64_t local(uint64_t row) const { return table_local_row(row, num_servers_); }

  TableSpec spec_;
  uint32_t server_;
  uint32_t num_servers_;
  uint64_t local_rows_;
  size_t state_per_row_;
  std::vector<float> values_;  // local_rows x dim
  std::vector<float> state_;   // local_rows x (state_floats x dim)
};

}  // namespace pshard
