// One embedding table's rows on one server: their values and optimizer state, made from the run's seed, updated row
// by row (lazily: a row's state changes only in the steps that touch it). A hashed table's rows are made the first
// time a step's pushes hold their id, admitted after a number of such steps, and dropped when unused for long.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/checkpoint/checkpoint_file.h"
#include "common/keys/table_layout.h"
#include "optim/optimizer.h"

namespace pshard {

// Why `rule` cannot update a table's rows one by one (it takes norms over a whole layer: lars, lamb), or "" when it
// can.
std::string table_rule_refusal(const optim::Optimizer& rule);

// What a hashed table's rows did on this server (all zero for a table of row indices).
struct TableRowCounts {
  uint64_t held = 0;          // rows stored now
  uint64_t admitted = 0;      // rows made so far
  uint64_t expired = 0;       // rows dropped unused (expire_after)
  uint64_t not_admitted = 0;  // row gradients dropped: the id was not admitted yet, or the table was full
};

// The rows of `spec` that server `server` of `num_servers` holds (table_layout.h: row r on server r mod S). A table of
// row indices makes all of them with table_initial_row() when the shard is built; a hashed one, none: an id's row
// starts as table_initial_row(id), which a read of an id not stored returns. State: optimizer.state_floats() planes
// per row, kept beside the row, zero at the start.
//
//   EmbeddingShard shard(spec, /*server=*/1, /*num_servers=*/2, seed, *optimizer);
//   shard.read(7, out);                                             // row 7 lives on server 1 of 2
//   shard.apply(rows, grads, n, *optimizer, lr, /*t=*/step + 1, step);  // rows: ids held here
class EmbeddingShard {
 public:
  EmbeddingShard(TableSpec spec, uint32_t server, uint32_t num_servers, uint64_t seed,
                 const optim::Optimizer& optimizer);

  const TableSpec& spec() const { return spec_; }
  uint64_t local_rows() const { return local_rows_; }  // a table of row indices: the rows here; hashed: capacity
  // Whether id `row` belongs to this server (a table of row indices: and is inside the table).
  bool holds(uint64_t row) const {
    return (spec_.hashed || row < spec_.rows) && table_server(row, num_servers_) == server_;
  }
  // The values of id `row` (held here): spec().dim floats into out.
  void read(uint64_t row, float* out) const;
  // One update of each of the n rows (ids held here, no two equal) with its gradient (grads: n x dim, row after
  // row): the optimizer's rule on the row's values and state with learning rate `lr` and update count `t`, at table
  // step `step`. Rows not listed keep their values and state. A hashed table first counts the id's step, makes the
  // row once admitted (and while it has room), and drops the gradient of a row not stored.
  void apply(const uint64_t* rows, const float* grads, size_t n, const optim::Optimizer& optimizer, float lr, int64_t t,
             int64_t step);
  // A hashed table at table step `step`: drops the rows no push held for more than expire_after steps.
  void expire(int64_t step);
  // Table step `step` closes with the n rows' gradients (the servers' sync step or one async push, pshard train's
  // step): one update of each (apply(), update count step + 1), then, for a hashed table every eighth of
  // expire_after steps, the sweep of expire() at step + 1 (a row is dropped between expire_after and 9/8 of it steps
  // after its last push: a sweep visits every row held).
  void close_step(const uint64_t* rows, const float* grads, size_t n, const optim::Optimizer& optimizer, float lr,
                  int64_t step);
  const TableRowCounts& counts() const { return counts_; }

  // Every row held here (local order, table_local_row) as float32, and their optimizer state: what a checkpoint keeps
  // of a table of row indices (a hashed one: save_hashed()).
  std::vector<float> values_as_floats() const;
  size_t value_count() const { return spec_.bf16 ? half_.size() : values_.size(); }
  const std::vector<float>& state() const { return state_; }
  // A checkpoint's rows and state in place of the ones made from the seed (sizes checked by the caller; bf16 storage
  // rounds the rows, which a checkpoint of such a table holds exactly).
  void restore(std::vector<float> values, std::vector<float> state);
  // A hashed table's rows as a checkpoint keeps them (CheckpointTable's values, state, ids, last steps, pending ids
  // and counts), in slot order without the free slots; restore_hashed() makes the table they describe again (its
  // slots in that order: where a row sits changes no value).
  void save_hashed(CheckpointTable& t) const;
  void restore_hashed(CheckpointTable& t);
  // Bytes of values and optimizer state.
  uint64_t bytes() const { return values_.size() * sizeof(float) + half_.size() * 2 + state_.size() * sizeof(float); }

 private:
  uint64_t local(uint64_t row) const { return table_local_row(row, num_servers_); }
  // A hashed row's slot, or -1 when it is not stored.
  int64_t slot(uint64_t row) const;
  // Where row `row` is (its slot), made from its id when admitted and there is room; -1 when it is not stored.
  int64_t admit(uint64_t row, int64_t step);

  TableSpec spec_;
  uint32_t server_;
  uint32_t num_servers_;
  uint64_t seed_;
  uint64_t local_rows_;
  size_t state_per_row_;
  // Makes room for one more row (a hashed table's new slot), and sets or gets row `place`'s values as float32.
  void grow_one_row();
  void set_row(size_t place, const float* v);
  void get_row(size_t place, float* out) const;

  std::vector<float> values_;   // local rows (hashed: slots) x dim, float32 storage
  std::vector<uint16_t> half_;  // the same, bf16 storage (spec_.bf16)
  std::vector<float> scratch_;  // one row as float32: a new row's initial values, a bf16 row being updated
  std::vector<float> state_;    // local rows (hashed: slots) x (state_floats x dim)
  // Hashed tables: id -> slot, each slot's id and last step touched, free slots, and the steps of ids not admitted.
  std::unordered_map<uint64_t, uint32_t> slots_;
  std::vector<uint64_t> slot_ids_;
  std::vector<int64_t> last_step_;
  std::vector<uint32_t> free_;
  std::unordered_map<uint64_t, uint32_t> seen_;
  TableRowCounts counts_;
};

}  // namespace pshard
