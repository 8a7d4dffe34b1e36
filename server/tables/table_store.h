// The embedding tables a server holds and the row requests at them: the tables declared by tableInit, the reads
// (rowPull) and the gradients (rowPush) of their rows, and when a synchronous step of a table closes. No sockets:
// requests in, the requests it finished out (the server replies to them).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/checkpoint/checkpoint_file.h"
#include "common/keys/table_layout.h"
#include "common/protocol/codec.h"
#include "common/util/json.h"
#include "optim/embedding_shard.h"
#include "optim/optimizer.h"
#include "server/consistency/consistency_mode.h"
#include "server/kv/request.h"

namespace pshard {

struct TableStoreOptions {
  uint32_t rank = 0;  // this server
  uint32_t num_servers = 1;
  uint32_t num_workers = 1;
  Consistency mode = Consistency::kBsp;
  std::shared_ptr<const optim::Optimizer> optimizer;  // the tables' rule (embedding.optimizer), applied per row
  float lr = 0.01f;                                   // the tables' learning rate (embedding.lr), constant
  uint64_t max_rows_per_request = uint64_t(1) << 20;  // cluster.max_rows_per_request
  // The most bytes of rows and optimizer state the tables may take on this server (0: the machine's physical
  // memory): a declaration of more is refused naming the tables' size, rather than ending the server out of memory.
  uint64_t max_bytes = 0;
};

// Synchronous jobs (BSP): a table's step t closes when every live worker pushed its rows of step t (maybe none): each
// row's gradient is the sum of the pushes that hold it, added in rank order, divided by the number of workers that
// pushed, then the rule updates each such row once with update count t + 1. A read of step t waits until step t - 1
// closed. That is the dense mean where the rows a worker did not push have a zero gradient. Async and SSP jobs:
// each push updates its rows at once, as it comes (its own gradient, update count = the table's pushes so far),
// and reads never wait. A push names only rows its worker read for that step (rowNotPulled otherwise), once per
// step and table (duplicatePush), so a gradient always belongs to weights the worker saw.
//
//   TableStore tables(opt);
//   if (!tables.declare(msg, code, why)) reply_error(code, why);      // tableInit
//   for (RequestPtr& r : tables.run(req)) reply(*r);                 // rowPull or rowPush
//   for (RequestPtr& r : tables.worker_dead(rank)) reply(*r);
class TableStore {
 public:
  explicit TableStore(TableStoreOptions options);
  ~TableStore();
  TableStore(const TableStore&) = delete;
  TableStore& operator=(const TableStore&) = delete;

  // tableInit: the first makes this server's rows of every table (from the seed); a later one must list the same
  // tables with the same seed. False with the error reply's code and text otherwise.
  bool declare(const protocol::Message& m, protocol::ErrorCode& code, std::string& why);
  // rowPull or rowPush whose sender check_request() accepted: the requests it finished (this one, and reads its
  // push released), in order; a finished read's reply frame is in Request::replies[0]; a refused one has
  // Request::error set and changed nothing.
  std::vector<RequestPtr> run(const RequestPtr& req);
  // Worker `rank` is dead or left: the steps close without it; the reads it held go through. A dead worker that reads
  // rows again (restarted, it rejoined the job at step s: its first row pull is of step s) is counted from step s on.
  std::vector<RequestPtr> worker_dead(uint32_t rank);

  // Checkpoints (sync jobs). Called on the caller's thread right after a table closed a step: the table, its new
  // version, and whether a push of that step carried the checkpoint or stop flag.
  std::function<void(uint32_t table, int64_t version, bool asked)> on_step_closed;
  // A copy of table `table`'s rows and state here, for the checkpoint of its current version.
  CheckpointTable snapshot(uint32_t table) const;
  // Before any request: the tables of a checkpoint, at their versions, instead of a tableInit's fresh rows (a later
  // tableInit must match them). An Error naming the table when a table's rows do not fit this server.
  void restore(std::vector<CheckpointTable> tables);

  bool declared() const { return size() > 0; }
  // Tables declared (read from any thread: a checkpointer on a slice's thread asks).
  size_t size() const { return count_.load(std::memory_order_acquire); }
  const EmbeddingShard& shard(uint32_t table) const;
  int64_t version(uint32_t table) const;  // steps of `table` closed (BSP) or pushes applied (async)
  uint64_t bytes() const;                 // values and optimizer state of every table held here
  // Per table: {table, bytes, rows_held} and, for a hashed table, {admitted, expired, not_admitted} (TableRowCounts).
  Json stats() const;
  size_t waiting() const;  // reads held

 private:
  struct Gate;
  bool pull(const RequestPtr& req, Gate& g, std::vector<uint64_t>& ids, const std::vector<uint64_t>& sorted);
  bool push(const RequestPtr& req, Gate& g, std::vector<uint64_t>& ids, std::vector<RequestPtr>& finished);
  void close_step(Gate& g);
  void answer(Request& req, const Gate& g, const std::vector<uint64_t>& ids);
  void release(Gate& g, std::vector<RequestPtr>& finished);
  void make_tables(std::vector<TableSpec> specs, uint64_t seed);
  bool counted(uint32_t worker, int64_t step) const;  // whether step `step` waits for the worker's push
  bool complete(const Gate& g) const;                 // every counted worker pushed the open step

  TableStoreOptions opt_;
  uint64_t seed_ = 0;
  std::vector<TableSpec> specs_;
  std::vector<std::unique_ptr<EmbeddingShard>> shards_;
  std::vector<std::unique_ptr<Gate>> gates_;
  std::vector<char> dead_;          // per worker
  std::vector<int64_t> rejoin_at_;  // per dead worker: the step it is counted from again (INT64_MAX: none)
  std::atomic<size_t> count_{0};    // shards_.size(), once they are made
};

}  // namespace pshard
