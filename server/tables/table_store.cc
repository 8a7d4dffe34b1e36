// TableStore: the tables' declaration, their rows' reads and pushes, and the close of a synchronous table step.
#include "server/tables/table_store.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <utility>

#include "common/compression/codec.h"
#include "common/error.h"
#include "common/reduce/rank_sum.h"

namespace pshard {

using protocol::ErrorCode;
using protocol::MessageType;

// One table's requests: its open step, the pushes of that step, the rows each worker read, the reads held.
struct TableStore::Gate {
  uint32_t table = 0;
  int64_t version = 0;  // BSP: steps closed; async: pushes applied
  struct Pushed {
    bool done = false;
    std::vector<uint64_t> ids;
    std::vector<float> grads;  // ids x dim
  };
  std::vector<Pushed> pushed;  // per worker, for step `version` (BSP)
  bool asked = false;          // a push of the open step carried the checkpoint or stop flag
  struct Read {
    int64_t step = -1;
    std::vector<uint64_t> rows;  // sorted: every row the worker read for `step`
  };
  std::vector<Read> read;  // per worker
  struct Waiting {
    RequestPtr req;
    std::vector<uint64_t> ids;
  };
  std::vector<Waiting> waiting;  // BSP reads of a step not closed yet
};

namespace {

TableSpec spec_of(const protocol::TableInfo& t) {
  TableSpec s;
  s.name = t.name;
  s.rows = t.rows;
  s.dim = t.dim;
  s.init = t.init == protocol::TableInit::UNIFORM ? TableInit::kUniform
           : t.init == protocol::TableInit::ZEROS ? TableInit::kZeros
                                                  : TableInit::kNormal;
  s.init_scale = t.init_scale;
  s.hashed = t.hashed;
  s.admit_after = t.admit_after;
  s.expire_after = t.expire_after;
  s.bf16 = t.bf16;
  return s;
}

bool same(const TableSpec& a, const TableSpec& b) {
  return a.name == b.name && a.rows == b.rows && a.dim == b.dim && a.init == b.init && a.init_scale == b.init_scale &&
         a.hashed == b.hashed && a.admit_after == b.admit_after && a.expire_after == b.expire_after && a.bf16 == b.bf16;
}

std::string step_text(const protocol::Message& m) {
  return "step " + std::to_string(m.step) + " from worker " + std::to_string(m.sender_rank);
}

}  // namespace

TableStore::TableStore(TableStoreOptions options)
    : opt_(std::move(options)),
      dead_(opt_.num_workers, 0),
      rejoin_at_(opt_.num_workers, std::numeric_limits<int64_t>::max()) {
  if (!opt_.optimizer) throw Error("server " + std::to_string(opt_.rank) + ": the embedding tables have no optimizer");
}

TableStore::~TableStore() = default;

const EmbeddingShard& TableStore::shard(uint32_t table) const { return *shards_.at(table); }

int64_t TableStore::version(uint32_t table) const { return gates_.at(table)->version; }

uint64_t TableStore::bytes() const {
  uint64_t b = 0;
  for (const auto& s : shards_) b += s->bytes();
  return b;
}

Json TableStore::stats() const {
  Json all = Json::array();
  for (const auto& s : shards_) {
    Json t = Json::object().set("table", s->spec().name).set("bytes", s->bytes());
    if (s->spec().hashed) {
      const TableRowCounts& c = s->counts();
      t.set("rows_held", c.held)
          .set("admitted", c.admitted)
          .set("expired", c.expired)
          .set("not_admitted", c.not_admitted);
    } else {
      t.set("rows_held", s->local_rows());
    }
    all.push(std::move(t));
  }
  return all;
}

size_t TableStore::waiting() const {
  size_t n = 0;
  for (const auto& g : gates_) n += g->waiting.size();
  return n;
}

bool TableStore::declare(const protocol::Message& m, ErrorCode& code, std::string& why) {
  std::vector<TableSpec> specs;
  for (const protocol::TableInfo& t : m.tables) specs.push_back(spec_of(t));
  if (declared()) {
    bool equal = specs.size() == specs_.size() && m.table_seed == seed_;
    for (size_t i = 0; equal && i < specs.size(); ++i) equal = same(specs[i], specs_[i]);
    if (!equal) {
      code = ErrorCode::LAYOUT_MISMATCH;
      why = "worker " + std::to_string(m.sender_rank) + " declares other embedding tables (or another seed) than " +
            "this server holds: " + std::to_string(specs_.size()) + " tables, the first " + describe_table(specs_[0]);
      return false;
    }
    return true;
  }
  try {
    check_table_specs(specs);
  } catch (const Error& e) {
    code = ErrorCode::BAD_HEADER;
    why = e.what();
    return false;
  }
  const uint64_t limit = opt_.max_bytes > 0 ? opt_.max_bytes
                                            : static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                                                  static_cast<uint64_t>(::sysconf(_SC_PAGE_SIZE));
  long double need = 0;  // long double: rows x dim of a declared table may exceed 64 bits of bytes
  for (const TableSpec& t : specs) {
    need += static_cast<long double>(table_rows_on(t.rows, opt_.num_servers, opt_.rank)) * t.dim *
            ((t.bf16 ? 2 : sizeof(float)) + sizeof(float) * opt_.optimizer->state_floats());
  }
  if (need > static_cast<long double>(limit)) {
    code = ErrorCode::BAD_HEADER;
    why = "the embedding tables need " + std::to_string(static_cast<double>(need) / 1e9) + " GB of rows and " +
          "optimizer state on server " + std::to_string(opt_.rank) + " of " + std::to_string(opt_.num_servers) +
          ", more than its " + std::to_string(static_cast<double>(limit) / 1e9) + " GB of memory: use more servers";
    return false;
  }
  const std::string refused = table_rule_refusal(*opt_.optimizer);  // a job without tables may use it for dense ones
  if (!refused.empty()) {
    code = ErrorCode::BAD_HEADER;
    why = refused;
    return false;
  }
  make_tables(std::move(specs), m.table_seed);
  return true;
}

void TableStore::make_tables(std::vector<TableSpec> specs, uint64_t seed) {
  seed_ = seed;
  specs_ = std::move(specs);
  for (uint32_t i = 0; i < specs_.size(); ++i) {
    shards_.push_back(std::make_unique<EmbeddingShard>(specs_[i], opt_.rank, opt_.num_servers, seed_, *opt_.optimizer));
    auto g = std::make_unique<Gate>();
    g->table = i;
    g->pushed.resize(opt_.num_workers);
    g->read.resize(opt_.num_workers);
    gates_.push_back(std::move(g));
  }
  count_.store(shards_.size(), std::memory_order_release);
}

CheckpointTable TableStore::snapshot(uint32_t table) const {
  const EmbeddingShard& shard = *shards_.at(table);
  CheckpointTable t;
  t.table = table;
  t.spec = shard.spec();
  t.seed = seed_;
  t.version = gates_[table]->version;
  t.optimizer = opt_.optimizer->name();
  t.state_floats = static_cast<uint32_t>(opt_.optimizer->state_floats());
  if (t.spec.hashed) {
    shard.save_hashed(t);
  } else {
    t.values = shard.values_as_floats();
    t.state = shard.state();
  }
  return t;
}

void TableStore::restore(std::vector<CheckpointTable> tables) {
  if (tables.empty()) return;
  if (declared()) throw Error("server " + std::to_string(opt_.rank) + ": embedding tables restored twice");
  std::vector<TableSpec> specs;
  for (const CheckpointTable& t : tables) {
    if (t.optimizer != opt_.optimizer->name() || t.state_floats != opt_.optimizer->state_floats()) {
      throw Error("embedding table " + describe_table(t.spec) + " was checkpointed with embedding.optimizer " +
                  t.optimizer + ", this server updates the tables with " + opt_.optimizer->name());
    }
    specs.push_back(t.spec);
  }
  check_table_specs(specs);
  make_tables(std::move(specs), tables[0].seed);
  for (uint32_t i = 0; i < tables.size(); ++i) {
    EmbeddingShard& shard = *shards_[i];
    gates_[i]->version = tables[i].version;
    if (tables[i].spec.hashed) {  // (a checkpoint of format 3 kept no rows: it starts empty)
      shard.restore_hashed(tables[i]);
      continue;
    }
    if (tables[i].values.size() != shard.value_count() || tables[i].state.size() != shard.state().size()) {
      throw Error("embedding table " + describe_table(tables[i].spec) + ": the checkpoint holds " +
                  std::to_string(tables[i].values.size()) + " values, server " + std::to_string(opt_.rank) + " of " +
                  std::to_string(opt_.num_servers) + " holds " + std::to_string(shard.value_count()));
    }
    shard.restore(std::move(tables[i].values), std::move(tables[i].state));
  }
}

bool TableStore::counted(uint32_t worker, int64_t step) const { return !dead_[worker] || rejoin_at_[worker] <= step; }

bool TableStore::complete(const Gate& g) const {
  bool any = false;
  for (uint32_t w = 0; w < opt_.num_workers; ++w) {
    if (g.pushed[w].done) {
      any = true;
    } else if (counted(w, g.version)) {
      return false;
    }
  }
  return any;
}

std::vector<RequestPtr> TableStore::run(const RequestPtr& req) {
  std::vector<RequestPtr> finished;
  const protocol::Message& m = req->msg;
  const auto refuse = [&](ErrorCode code, std::string why) {
    req->fail(code, std::move(why));
    finished.push_back(req);
    return finished;
  };
  if (!declared()) return refuse(ErrorCode::UNKNOWN_TABLE, "no tableInit has declared the embedding tables yet");
  if (m.table >= shards_.size()) {
    return refuse(ErrorCode::UNKNOWN_TABLE, "table " + std::to_string(m.table) + " does not exist (the job has " +
                                                std::to_string(shards_.size()) + " embedding tables)");
  }
  Gate& g = *gates_[m.table];
  const EmbeddingShard& shard = *shards_[m.table];
  const std::string table = "table " + shard.spec().name;
  const std::shared_ptr<zmq::message_t>& id_frame = req->payloads.at(0);
  const size_t n = id_frame->size() / sizeof(uint64_t);
  if (n > opt_.max_rows_per_request) {
    return refuse(ErrorCode::TOO_MANY_ROWS,
                  table + ", " + step_text(m) + ": " + std::to_string(n) +
                      " rows, more than cluster.max_rows_per_request = " + std::to_string(opt_.max_rows_per_request));
  }
  std::vector<uint64_t> ids(n);
  if (n > 0) std::memcpy(ids.data(), id_frame->data(), n * sizeof(uint64_t));
  for (uint64_t id : ids) {
    if (!shard.spec().hashed && id >= shard.spec().rows) {
      return refuse(ErrorCode::BAD_ROW, table + ", " + step_text(m) + ": row " + std::to_string(id) +
                                            " is outside the table (" + std::to_string(shard.spec().rows) + " rows)");
    }
    if (!shard.holds(id)) {
      return refuse(ErrorCode::BAD_ROW, table + ", " + step_text(m) + ": row " + std::to_string(id) +
                                            " lives on server " + std::to_string(table_server(id, opt_.num_servers)) +
                                            ", not on server " + std::to_string(opt_.rank));
    }
  }
  std::vector<uint64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end()) {
    return refuse(ErrorCode::DUPLICATE_ROW,
                  table + ", " + step_text(m) + ": row " + std::to_string(*dup) + " is listed twice");
  }
  const bool done = m.type == MessageType::ROW_PULL ? pull(req, g, ids, sorted) : push(req, g, ids, finished);
  if (done) finished.insert(finished.begin(), req);
  return finished;
}

bool TableStore::pull(const RequestPtr& req, Gate& g, std::vector<uint64_t>& ids, const std::vector<uint64_t>& sorted) {
  const protocol::Message& m = req->msg;
  if (dead_[m.sender_rank] && m.step < rejoin_at_[m.sender_rank]) {
    rejoin_at_[m.sender_rank] = std::max(m.step, g.version);  // a restarted worker rejoined: counted from here on
  }
  Gate::Read& r = g.read[m.sender_rank];
  if (r.step != m.step) {
    r.step = m.step;
    r.rows = sorted;
  } else {  // a second read of the step: the worker may push the rows of both
    std::vector<uint64_t> both;
    std::set_union(r.rows.begin(), r.rows.end(), sorted.begin(), sorted.end(), std::back_inserter(both));
    r.rows.swap(both);
  }
  if (opt_.mode == Consistency::kBsp && m.step > g.version) {
    g.waiting.push_back({req, std::move(ids)});
    return false;
  }
  answer(*req, g, ids);
  return true;
}

bool TableStore::push(const RequestPtr& req, Gate& g, std::vector<uint64_t>& ids, std::vector<RequestPtr>& finished) {
  const protocol::Message& m = req->msg;
  EmbeddingShard& shard = *shards_[g.table];
  const std::string where = "table " + shard.spec().name + ", " + step_text(m);
  const uint32_t dim = shard.spec().dim;
  if (req->payloads.size() < 2 || !req->payloads[1]) {  // the server makes it from the row segment in shared memory
    req->fail(ErrorCode::WRONG_PAYLOAD_COUNT, where + ": the rows' gradients are missing");
    return true;
  }
  const zmq::message_t& values = *req->payloads[1];
  const size_t vb = protocol::row_value_bytes(m.row_encoding);
  if (values.size() != ids.size() * dim * vb) {
    req->fail(ErrorCode::WRONG_LENGTH, where + ": " + std::to_string(values.size()) + " bytes of gradients for " +
                                           std::to_string(ids.size()) + " rows of " + std::to_string(dim) +
                                           " values, expected " + std::to_string(ids.size() * dim * vb));
    return true;
  }
  const Gate::Read& r = g.read[m.sender_rank];
  for (uint64_t id : ids) {
    if (r.step != m.step || !std::binary_search(r.rows.begin(), r.rows.end(), id)) {
      req->fail(ErrorCode::ROW_NOT_PULLED, where + ": row " + std::to_string(id) +
                                               " was not pulled by this worker for step " + std::to_string(m.step));
      return true;
    }
  }
  if (opt_.mode == Consistency::kBsp) {
    if (m.step != g.version) {
      req->fail(ErrorCode::BAD_STEP, where + ": the table's open step is " + std::to_string(g.version) +
                                         (m.step < g.version ? " (this step closed)" : ""));
      return true;
    }
    if (g.pushed[m.sender_rank].done) {
      req->fail(ErrorCode::DUPLICATE_PUSH, where + ": this worker already pushed the step");
      return true;
    }
  }
  std::vector<float> grads(ids.size() * dim);
  if (!grads.empty())
    compression::decode_encoded(m.row_encoding, values.data(), values.size(), grads.size(), grads.data());
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!std::isfinite(grads[i])) {
      req->fail(ErrorCode::NON_FINITE_GRADIENT, where + ": the gradient of row " + std::to_string(ids[i / dim]) +
                                                    " holds " + std::to_string(grads[i]) + " at column " +
                                                    std::to_string(i % dim));
      return true;
    }
  }
  if (opt_.mode != Consistency::kBsp) {
    shard.close_step(ids.data(), grads.data(), ids.size(), *opt_.optimizer, opt_.lr, g.version);
    ++g.version;
    return true;
  }
  Gate::Pushed& p = g.pushed[m.sender_rank];
  p.done = true;
  p.ids = std::move(ids);
  p.grads = std::move(grads);
  g.asked = g.asked || m.checkpoint || m.stop;
  if (complete(g)) {
    close_step(g);
    release(g, finished);
  }
  return true;
}

void TableStore::close_step(Gate& g) {
  EmbeddingShard& shard = *shards_[g.table];
  const size_t dim = shard.spec().dim;
  uint32_t count = 0;
  std::unordered_map<uint64_t, size_t> at;  // row -> its place in rows/sums
  std::vector<uint64_t> rows;
  std::vector<float> sums;
  for (Gate::Pushed& p : g.pushed) {  // rank order
    if (!p.done) continue;
    ++count;
    for (size_t i = 0; i < p.ids.size(); ++i) {
      const float* grad = p.grads.data() + i * dim;
      const auto [it, fresh] = at.emplace(p.ids[i], rows.size());
      if (fresh) {
        rows.push_back(p.ids[i]);
        sums.insert(sums.end(), grad, grad + dim);
      } else {
        reduce::sum_add(sums.data() + it->second * dim, grad, dim);
      }
    }
    p = Gate::Pushed();
  }
  if (count > 0 && !rows.empty()) reduce::mean(sums.data(), sums.data(), sums.size(), count);
  shard.close_step(rows.data(), sums.data(), rows.size(), *opt_.optimizer, opt_.lr, g.version);
  ++g.version;
  const bool asked = g.asked;
  g.asked = false;
  if (on_step_closed) on_step_closed(g.table, g.version, asked);
}

void TableStore::release(Gate& g, std::vector<RequestPtr>& finished) {
  std::vector<Gate::Waiting> still;
  for (Gate::Waiting& w : g.waiting) {
    if (w.req->msg.step <= g.version) {
      answer(*w.req, g, w.ids);
      finished.push_back(std::move(w.req));
    } else {
      still.push_back(std::move(w));
    }
  }
  g.waiting.swap(still);
}

void TableStore::answer(Request& req, const Gate& g, const std::vector<uint64_t>& ids) {
  const EmbeddingShard& shard = *shards_[g.table];
  const size_t dim = shard.spec().dim;
  std::vector<float> rows(ids.size() * dim);
  for (size_t i = 0; i < ids.size(); ++i) shard.read(ids[i], rows.data() + i * dim);
  req.replies.clear();
  if (req.msg.row_encoding == protocol::Encoding::NONE) {
    req.replies.emplace_back(rows.data(), rows.size() * sizeof(float));
  } else {
    auto codec = compression::make_codec({req.msg.row_encoding});
    zmq::message_t frame(codec->max_encoded_bytes(rows.size()));
    const size_t bytes = codec->encode(rows.data(), rows.size(), static_cast<uint8_t*>(frame.data()));
    req.replies.emplace_back(frame.data(), bytes);
  }
}

std::vector<RequestPtr> TableStore::worker_dead(uint32_t rank) {
  std::vector<RequestPtr> finished;
  if (rank >= dead_.size() || (dead_[rank] && rejoin_at_[rank] == std::numeric_limits<int64_t>::max())) {
    return finished;
  }
  dead_[rank] = 1;
  rejoin_at_[rank] = std::numeric_limits<int64_t>::max();
  if (opt_.mode != Consistency::kBsp) return finished;
  for (auto& gp : gates_) {
    Gate& g = *gp;
    if (complete(g)) {
      close_step(g);
      release(g, finished);
    }
  }
  return finished;
}

}  // namespace pshard
