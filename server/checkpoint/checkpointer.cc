// Checkpointer: snapshots on the slices' threads, files on a writer thread; restore_checkpoint.
#include "server/checkpoint/checkpointer.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "common/error.h"
#include "common/keys/slice_layout.h"
#include "common/util/log.h"

namespace pshard {

std::function<void(SliceStore&, TableStore&)> server_checkpoints(const KvServerOptions& opt,
                                                                 std::unique_ptr<Checkpointer>& checkpointer) {
  return [opt, &checkpointer](SliceStore& store, TableStore& tables) {
    if (!opt.restore_path.empty()) restore_checkpoint(opt.restore_path, opt, store, tables);
    if (opt.checkpoint_dir.empty()) return;
    checkpointer = std::make_unique<Checkpointer>(opt, store, tables);
    store.on_step_closed = [c = checkpointer.get()](const Slice& s, bool asked) { c->step_closed(s, asked); };
    tables.on_step_closed = [c = checkpointer.get()](uint32_t t, int64_t version, bool asked) {
      c->table_closed(t, version, asked);
    };
  };
}

namespace {

// A server killed while it wrote a checkpoint left DIR/.server-R.step-K.ckpt.tmp.PID behind: never read (only the
// rename publishes a checkpoint), but it holds a whole checkpoint's bytes. Server R's files are written by server R
// alone, so every such file of its rank but this process's own is stale, whichever host wrote it.
void remove_stale_temporaries(const std::string& dir, uint32_t rank) {
  const std::string prefix = ".server-" + std::to_string(rank) + ".step-";
  const std::string own = ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.find(".ckpt.tmp.") == std::string::npos) continue;
    if (name.size() >= own.size() && name.compare(name.size() - own.size(), own.size(), own) == 0) continue;
    std::error_code removed;
    if (std::filesystem::remove(e.path(), removed)) {
      PSHARD_LOG(kInfo) << "server " << rank << ": removed " << e.path().string()
                        << ", left by a server killed while it wrote that checkpoint";
    }
  }
}

}  // namespace

Checkpointer::Checkpointer(const KvServerOptions& opt, const SliceStore& store, const TableStore& tables)
    : opt_(opt), store_(store), tables_(tables), writer_([this] { write_loop(); }) {
  remove_stale_temporaries(opt_.checkpoint_dir, opt_.rank);
}

Checkpointer::~Checkpointer() { stop(); }

bool Checkpointer::is_checkpoint_step(int64_t step, bool asked) const {
  return asked || (opt_.checkpoint_every_steps > 0 && step % opt_.checkpoint_every_steps == 0);
}

void Checkpointer::step_closed(const Slice& s, bool asked) {
  if (!is_checkpoint_step(s.version(), asked)) return;
  CheckpointSlice c;
  c.id = s.id;
  c.version = s.version();
  c.updates = s.updates;
  c.weights.assign(s.weights.data(), s.weights.data() + s.weights.size());
  c.opt_state = s.opt_state;
  {
    std::lock_guard<std::mutex> lock(mu_);
    snapshots_[s.version()].slices.push_back(std::move(c));
    if (!take_if_complete(s.version())) return;
  }
  cv_.notify_all();
}

void Checkpointer::table_closed(uint32_t table, int64_t version, bool asked) {
  if (!is_checkpoint_step(version, asked)) return;
  CheckpointTable t = tables_.snapshot(table);
  {
    std::lock_guard<std::mutex> lock(mu_);
    snapshots_[version].tables.push_back(std::move(t));
    if (!take_if_complete(version)) return;
  }
  cv_.notify_all();
}

bool Checkpointer::take_if_complete(int64_t step) {
  Snapshot& snap = snapshots_[step];
  // A job's tables are declared at its workers' start, before any step closes.
  if (snap.slices.size() < store_.local_slices() || snap.tables.size() < tables_.size()) return false;
  if (!store_.layout()) return false;  // tables only, before the model's init: nothing to come back to
  to_write_.push_back(header(step));
  to_write_.back().slices = std::move(snap.slices);
  to_write_.back().tables = std::move(snap.tables);
  snapshots_.erase(step);
  return true;
}

// Read here, on a slice's thread, so that the writer never touches the store (which may be gone before it stops).
ServerCheckpoint Checkpointer::header(int64_t step) const {
  ServerCheckpoint c;
  c.run_id = opt_.run_id;
  c.settings_hash = opt_.settings_hash;
  c.server_rank = opt_.rank;
  c.num_servers = opt_.num_servers;
  c.num_workers = opt_.num_workers;
  c.step = step;
  c.run_total_steps = store_.run_total_steps();
  c.slice_bytes = opt_.slice_bytes;
  c.layout_fingerprint = store_.layout()->fingerprint();
  c.state_floats = static_cast<uint32_t>(opt_.optimizer->state_floats());
  c.optimizer = opt_.optimizer->name();
  c.tensors = store_.layout()->tensors();
  return c;
}

void Checkpointer::stop() {
  if (!writer_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  writer_.join();
}

void Checkpointer::write_loop() {
  for (;;) {
    ServerCheckpoint c;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !to_write_.empty(); });
      if (to_write_.empty()) return;
      c = std::move(to_write_.front());
      to_write_.pop_front();
    }
    std::sort(c.slices.begin(), c.slices.end(),
              [](const CheckpointSlice& a, const CheckpointSlice& b) { return a.id < b.id; });
    std::sort(c.tables.begin(), c.tables.end(),
              [](const CheckpointTable& a, const CheckpointTable& b) { return a.table < b.table; });
    const std::string path = checkpoint_path(opt_.checkpoint_dir, opt_.rank, c.step);
    try {
      write_checkpoint(path, c);
      prune_checkpoints(opt_.checkpoint_dir, opt_.rank, opt_.checkpoint_keep, opt_.run_id);
      ++written_;
      PSHARD_LOG(kInfo) << "server " << opt_.rank << ": checkpoint of step " << c.step << " written to " << path;
    } catch (const Error& e) {
      ++failed_;
      PSHARD_LOG(kError) << "server " << opt_.rank << ": checkpoint of step " << c.step << " not written: " << e.what();
    }
  }
}

void restore_checkpoint(const std::string& path, const KvServerOptions& opt, SliceStore& store, TableStore& tables) {
  ServerCheckpoint c = read_checkpoint(path);
  auto mismatch = [&](const std::string& what, const std::string& file, const std::string& here) {
    throw Error("checkpoint " + path + " was written with " + what + " " + file + ", this server has " + here);
  };
  if (c.run_id != opt.run_id) {
    throw Error("checkpoint " + path + " belongs to run " + (c.run_id.empty() ? "(none)" : c.run_id) +
                ", this server is in run " + (opt.run_id.empty() ? "(none)" : opt.run_id) +
                ": a run only restores its own checkpoints");
  }
  if (c.settings_hash != opt.settings_hash) {
    throw Error("checkpoint " + path +
                " was written with other settings (a model, data, train, optimizer, lr_schedule or cluster.mode "
                "setting differs; see docs/OPERATIONS.md, \"Resuming a run\")");
  }
  if (c.server_rank != opt.rank) {
    // Another server's file gives the layout to a server that owns no slices (and so wrote none).
    if (SliceLayout(c.tensors, c.slice_bytes, c.num_servers).bytes_on_server(opt.rank) != 0 || !c.tables.empty())
      mismatch("server rank", std::to_string(c.server_rank), std::to_string(opt.rank));
    c.slices.clear();
  }
  if (c.num_servers != opt.num_servers)
    mismatch("servers =", std::to_string(c.num_servers), std::to_string(opt.num_servers));
  if (c.num_workers != opt.num_workers)
    mismatch("workers =", std::to_string(c.num_workers), std::to_string(opt.num_workers));
  if (c.slice_bytes != opt.slice_bytes)
    mismatch("cluster.slice_bytes =", std::to_string(c.slice_bytes), std::to_string(opt.slice_bytes));
  if (c.optimizer != opt.optimizer->name() || c.state_floats != opt.optimizer->state_floats())
    mismatch("optimizer", c.optimizer, opt.optimizer->name());
  protocol::ErrorCode code = protocol::ErrorCode::NONE;
  std::string why;
  if (!store.install(c.tensors, c.layout_fingerprint, c.run_total_steps, code, why)) {
    throw Error("checkpoint " + path + ": " + why);
  }
  for (CheckpointSlice& cs : c.slices) {
    store.slice(cs.id)->restore(std::move(cs));  // read_checkpoint checked that the id is this server's
  }
  try {
    tables.restore(std::move(c.tables));
  } catch (const Error& e) {
    throw Error("checkpoint " + path + ": " + e.what());
  }
  PSHARD_LOG(kInfo) << "server " << opt.rank << ": restored step " << c.step << " from " << path;
}

}  // namespace pshard
