// Server checkpoints: each slice's state copied at a checkpoint step, a writer thread for the files, and restore.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/checkpoint/checkpoint_file.h"
#include "server/kv/server_options.h"
#include "server/kv/slice_store.h"
#include "server/tables/table_store.h"

namespace pshard {

// A step is a checkpoint step when it is a multiple of checkpoint_every_steps or a push of it asked for one. Each
// slice copies its state on its own thread when it closes such a step (so no slice waits for another), and each
// embedding table on the socket thread when it does; once every slice and table of this server is in, the writer
// thread writes checkpoint_dir/server-R.step-K.ckpt atomically and keeps the newest checkpoint_keep files of this run
// (opt.run_id). A failed write is logged and the run goes on. The owner of a KvServer owns its checkpointer
// (server_checkpoints()).
//
//   Checkpointer ckpt(options, store, tables);  // options.checkpoint_dir is set
//   store.on_step_closed = [&](const Slice& s, bool asked) { ckpt.step_closed(s, asked); };
//   tables.on_step_closed = [&](uint32_t t, int64_t version, bool asked) { ckpt.table_closed(t, version, asked); };
//   ...
//   ckpt.stop();  // after the slices' threads: writes what is complete, joins the writer
class Checkpointer {
 public:
  // Keeps a copy of `opt` and references to the stores, used on their threads only; starts the writer.
  Checkpointer(const KvServerOptions& opt, const SliceStore& store, const TableStore& tables);
  ~Checkpointer();  // stop()
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // On the slice's thread, right after it closed a step; `asked`: a push of that step carried the checkpoint flag.
  void step_closed(const Slice& s, bool asked);
  // On the socket thread, right after embedding table `table` closed a step and reached `version`.
  void table_closed(uint32_t table, int64_t version, bool asked);
  // Writes the checkpoints that are complete, then joins the writer. Idempotent.
  void stop();
  uint64_t written() const { return written_; }  // files written
  uint64_t failed() const { return failed_; }    // checkpoints that could not be written (each logged)

 private:
  void write_loop();
  bool is_checkpoint_step(int64_t step, bool asked) const;
  ServerCheckpoint header(int64_t step) const;  // the file's fields but the slices and tables
  // With mu_ held: the checkpoint of `step` goes to the writer once every slice and table is in.
  bool take_if_complete(int64_t step);

  const KvServerOptions opt_;
  const SliceStore& store_;
  const TableStore& tables_;
  std::mutex mu_;
  std::condition_variable cv_;
  struct Snapshot {
    std::vector<CheckpointSlice> slices;
    std::vector<CheckpointTable> tables;
  };
  std::map<int64_t, Snapshot> snapshots_;  // by step, until every local slice and table is in
  std::deque<ServerCheckpoint> to_write_;
  bool stop_ = false;
  std::atomic<uint64_t> written_{0};
  std::atomic<uint64_t> failed_{0};
  std::thread writer_;
};

// Before any thread of the server runs: the layout, weights, optimizer state and versions from checkpoint `path`
// into `store`, and the embedding tables' rows into `tables`. Throws an Error naming the file when it is corrupt,
// belongs to another run (opt.run_id), was written with other fixed settings (opt.settings_hash) or for another job
// shape.
void restore_checkpoint(const std::string& path, const KvServerOptions& opt, SliceStore& store, TableStore& tables);

// The checkpoints of the server that `opt` builds, as its KvServerOptions::prepare_store: the store restored from
// opt.restore_path when it is set, and with opt.checkpoint_dir a checkpointer, made in `checkpointer`, on the steps the
// store closes. The checkpointer outlives the server's threads: stop it after KvServer::stop() (it never touches the
// store afterwards).
//
//   std::unique_ptr<Checkpointer> checkpointer;
//   opt.prepare_store = server_checkpoints(opt, checkpointer);
//   KvServer server(opt);
//   ...
//   server.stop();
//   if (checkpointer) checkpointer->stop();
std::function<void(SliceStore&, TableStore&)> server_checkpoints(const KvServerOptions& opt,
                                                                 std::unique_ptr<Checkpointer>& checkpointer);

}  // namespace pshard
