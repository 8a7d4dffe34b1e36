// One server's checkpoint file: header (magic, version, rank, step, tensor list, slice table) + raw float32 data, then
// the server's rows of each embedding table.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/keys/slice_layout.h"
#include "common/keys/table_layout.h"

namespace pshard {

// The state of one slice at a checkpoint.
struct CheckpointSlice {
  uint32_t id = 0;               // global slice id in the layout
  int64_t version = 0;           // BSP: steps aggregated (equals the checkpoint's step)
  int64_t updates = 0;           // optimizer applications (Adam's t)
  std::vector<float> weights;    // the slice's length
  std::vector<float> opt_state;  // length x state_floats (optimizer planes)
};

// One embedding table's rows on the server at a checkpoint (server/tables/table_store.h).
struct CheckpointTable {
  uint32_t table = 0;  // the table's id (files keep the tables in id order)
  TableSpec spec;
  uint64_t seed = 0;      // the run's seed the rows were made from
  int64_t version = 0;    // the table's steps closed (sync: the checkpoint's step)
  std::string optimizer;  // the tables' rule (embedding.optimizer), checked on load
  uint32_t state_floats = 0;
  std::vector<float> values;  // the server's rows (table_rows_on; hashed: those held, as `ids`) x dim, local row order
  std::vector<float> state;   // rows x state_floats x dim
  // A hashed table: the id of each row in `values`, the table step a push last held it, the ids seen but not
  // admitted yet with the steps that held them, and the rows' counts so far (held: ids.size()).
  std::vector<uint64_t> ids;
  std::vector<int64_t> last_steps;
  std::vector<std::pair<uint64_t, uint32_t>> pending;
  uint64_t admitted = 0, expired = 0, not_admitted = 0;
};

// Everything a server needs to come back at `step`.
struct ServerCheckpoint {
  std::string run_id;          // the run that wrote it (RUN_DIR/run-id; "" for a server started by hand)
  uint64_t settings_hash = 0;  // fixed_settings_hash() of the run's config (common/run/run_settings.h)
  uint32_t server_rank = 0;
  uint32_t num_servers = 0;
  uint32_t num_workers = 0;
  int64_t step = 0;             // every slice is at this version (sync mode: a step boundary)
  int64_t run_total_steps = 0;  // what worker 0's init said (for run-length schedules)
  uint64_t slice_bytes = 0;
  uint64_t layout_fingerprint = 0;
  uint32_t state_floats = 0;  // optimizer state floats per element
  std::string optimizer;      // optimizer name, checked on load
  std::vector<TensorSpec> tensors;
  std::vector<CheckpointSlice> slices;  // this server's slices, ascending id
  std::vector<CheckpointTable> tables;  // the job's embedding tables, in table-id order (this server's rows)
};

// RUN_DIR/checkpoints/server-R.step-K.ckpt
std::string checkpoint_path(const std::string& dir, uint32_t server_rank, int64_t step);

// Writes atomically: DIR/.name.tmp, fsync, rename to the final name, fsync the directory.
// Throws pshard::Error naming the file on any I/O failure.
void write_checkpoint(const std::string& path, const ServerCheckpoint& ckpt);

// Reads and checks a checkpoint: magic, format version, sizes, the slice table against the
// tensor list, and a CRC-32 of the whole file. A truncated or corrupt file is a pshard::Error
// naming the file and what was wrong.
//
//   ServerCheckpoint c = read_checkpoint(checkpoint_path(run_dir + "/checkpoints", 0, 400));
ServerCheckpoint read_checkpoint(const std::string& path);

// The run id in the header of checkpoint `path`, reading only the start of the file; an Error naming the file when
// it is not a checkpoint of this format version (an older pshard's file has no run id).
std::string read_checkpoint_run_id(const std::string& path);

// Steps with a checkpoint file of `server_rank` in `dir` (by file name only), ascending.
std::vector<int64_t> checkpoint_steps(const std::string& dir, uint32_t server_rank);

// The newest step for which every server 0..num_servers-1 has a complete checkpoint of run `run_id` (all files
// read and checked; a server that owns no slices in the layout needs none); -1 when there is none. Files that fail the
// check or belong to another run are reported in `skipped` ("checkpoint PATH: why") and ignored.
int64_t newest_complete_step(const std::string& dir, uint32_t num_servers, const std::string& run_id,
                             std::vector<std::string>* skipped);

// Deletes the checkpoints of `server_rank` of run `run_id` older than its newest `keep` (keep 0: delete nothing).
// Files of other runs, and files whose run cannot be read, are never deleted and do not count.
void prune_checkpoints(const std::string& dir, uint32_t server_rank, int64_t keep, const std::string& run_id);

}  // namespace pshard
