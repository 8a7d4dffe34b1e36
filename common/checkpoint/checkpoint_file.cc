// Checkpoint files: a little-endian header, the raw slice data, and a CRC-32 trailer (docs/OPERATIONS.md).
#include "common/checkpoint/checkpoint_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <set>

#include "common/error.h"
#include "common/util/binary_file.h"

namespace pshard {
namespace {

constexpr char kMagic[8] = {'P', 'S', 'H', 'D', 'C', 'K', 'P', 'T'};
// 2: run id and settings hash after the version; 3: the embedding tables after the slices (version 2 files, which
// have none, are still read); 4: a hashed table's rows with their ids, last steps, pending ids and counts (version 3
// kept none: such a table is read as empty), and a table's bf16 storage (its rows are still written as float32).
constexpr uint32_t kFormatVersion = 4;
constexpr uint32_t kOldestReadable = 2;
constexpr uint32_t kMaxTables = 1u << 12;
constexpr uint32_t kMaxRunIdBytes = 64;
constexpr uint32_t kMaxNameBytes = 4096;

using binary::put;
using binary::put_string;

void put_floats(std::string& out, const std::vector<float>& v) { binary::put_floats(out, v.data(), v.size()); }

// zlib's CRC-32 over any size (crc32() takes a 32-bit length: a file of tables passes 4 GiB).
uint32_t crc_of(const char* data, size_t n) {
  return static_cast<uint32_t>(::crc32_z(0L, reinterpret_cast<const Bytef*>(data), n));
}

void check_version(binary::Reader& r, uint32_t version) {
  if (version < kOldestReadable || version > kFormatVersion) {
    r.fail("format version " + std::to_string(version) + ", this build reads versions " +
           std::to_string(kOldestReadable) + " to " + std::to_string(kFormatVersion));
  }
}

// "server-R.step-K.ckpt" -> K for rank R; -1 when the name does not match.
int64_t step_of(const std::string& name, uint32_t rank) {
  const std::string prefix = "server-" + std::to_string(rank) + ".step-";
  const std::string suffix = ".ckpt";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return -1;
  }
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoll(digits);
}

}  // namespace

std::string checkpoint_path(const std::string& dir, uint32_t server_rank, int64_t step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "server-%u.step-%08lld.ckpt", server_rank, static_cast<long long>(step));
  return dir + "/" + buf;
}

void write_checkpoint(const std::string& path, const ServerCheckpoint& c) {
  std::string out;
  out.append(kMagic, sizeof kMagic);
  put<uint32_t>(out, kFormatVersion);
  put_string(out, c.run_id);
  put<uint64_t>(out, c.settings_hash);
  put<uint32_t>(out, c.server_rank);
  put<uint32_t>(out, c.num_servers);
  put<uint32_t>(out, c.num_workers);
  put<int64_t>(out, c.step);
  put<int64_t>(out, c.run_total_steps);
  put<uint64_t>(out, c.slice_bytes);
  put<uint64_t>(out, c.layout_fingerprint);
  put<uint32_t>(out, c.state_floats);
  put_string(out, c.optimizer);
  put<uint32_t>(out, static_cast<uint32_t>(c.tensors.size()));
  for (const TensorSpec& t : c.tensors) {
    put_string(out, t.name);
    put<uint64_t>(out, t.numel);
  }
  put<uint32_t>(out, static_cast<uint32_t>(c.slices.size()));
  for (const CheckpointSlice& s : c.slices) {
    put<uint32_t>(out, s.id);
    put<int64_t>(out, s.version);
    put<int64_t>(out, s.updates);
    put<uint64_t>(out, s.weights.size());
  }
  for (const CheckpointSlice& s : c.slices) {
    if (s.opt_state.size() != s.weights.size() * c.state_floats) {
      throw Error("checkpoint " + path + ": slice " + std::to_string(s.id) + " has " +
                  std::to_string(s.opt_state.size()) + " optimizer floats, expected " +
                  std::to_string(s.weights.size() * c.state_floats));
    }
    put_floats(out, s.weights);
    put_floats(out, s.opt_state);
  }
  put<uint32_t>(out, static_cast<uint32_t>(c.tables.size()));
  for (const CheckpointTable& t : c.tables) {
    const uint64_t rows = t.spec.hashed ? t.ids.size() : table_rows_on(t.spec.rows, c.num_servers, c.server_rank);
    if (t.values.size() != rows * t.spec.dim || t.state.size() != t.values.size() * t.state_floats ||
        (t.spec.hashed && t.last_steps.size() != rows)) {
      throw Error("checkpoint " + path + ": embedding table " + describe_table(t.spec) + " has " +
                  std::to_string(t.values.size()) + " values and " + std::to_string(t.state.size()) +
                  " optimizer floats for this server's " + std::to_string(rows) + " rows");
    }
    put_string(out, t.spec.name);
    put<uint64_t>(out, t.spec.rows);
    put<uint32_t>(out, t.spec.dim);
    put<uint32_t>(out, static_cast<uint32_t>(t.spec.init));
    put<float>(out, t.spec.init_scale);
    put<uint32_t>(out, (t.spec.hashed ? 1 : 0) | (t.spec.bf16 ? 2 : 0));  // (format 4: bit 1, bf16 storage)
    put<uint32_t>(out, t.spec.admit_after);
    put<int64_t>(out, t.spec.expire_after);
    put<uint64_t>(out, t.seed);
    put<int64_t>(out, t.version);
    put_string(out, t.optimizer);
    put<uint32_t>(out, t.state_floats);
    if (t.spec.hashed) {  // the rows held, then their ids and last steps (the values and state follow as for others)
      put<uint64_t>(out, rows);
      for (uint64_t id : t.ids) put<uint64_t>(out, id);
      for (int64_t step : t.last_steps) put<int64_t>(out, step);
    }
    put_floats(out, t.values);
    put_floats(out, t.state);
    if (t.spec.hashed) {
      put<uint64_t>(out, t.pending.size());
      for (const auto& [id, seen] : t.pending) {
        put<uint64_t>(out, id);
        put<uint32_t>(out, seen);
      }
      put<uint64_t>(out, t.admitted);
      put<uint64_t>(out, t.expired);
      put<uint64_t>(out, t.not_admitted);
    }
  }
  put<uint32_t>(out, crc_of(out.data(), out.size()));

  binary::write_file_atomically(path, out, "checkpoint");
}

ServerCheckpoint read_checkpoint(const std::string& path) {
  binary::Reader r("checkpoint " + path, binary::read_file(path, "checkpoint"));
  const std::string& bytes = r.bytes();
  char magic[sizeof kMagic];
  for (char& ch : magic) ch = r.get<char>("the magic number");
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0) r.fail("not a pshard checkpoint (bad magic number)");
  const uint32_t version = r.get<uint32_t>("the format version");
  check_version(r, version);
  if (bytes.size() < sizeof(uint32_t) + r.pos()) r.fail("truncated: no CRC trailer");
  {
    uint32_t stored;
    std::memcpy(&stored, bytes.data() + bytes.size() - sizeof stored, sizeof stored);
    if (crc_of(bytes.data(), bytes.size() - sizeof stored) != stored) {
      throw Error("checkpoint " + path +
                  ": CRC mismatch (the file is truncated or corrupt: " + std::to_string(bytes.size()) + " bytes)");
    }
  }
  ServerCheckpoint c;
  c.run_id = r.get_string("the run id", kMaxRunIdBytes);
  c.settings_hash = r.get<uint64_t>("the settings hash");
  c.server_rank = r.get<uint32_t>("the server rank");
  c.num_servers = r.get<uint32_t>("the number of servers");
  c.num_workers = r.get<uint32_t>("the number of workers");
  c.step = r.get<int64_t>("the step");
  c.run_total_steps = r.get<int64_t>("the run length");
  c.slice_bytes = r.get<uint64_t>("slice_bytes");
  c.layout_fingerprint = r.get<uint64_t>("the layout fingerprint");
  c.state_floats = r.get<uint32_t>("the optimizer state size");
  c.optimizer = r.get_string("the optimizer name", kMaxNameBytes);
  if (c.num_servers == 0 || c.server_rank >= c.num_servers || c.step < 0 || c.state_floats > 16) {
    r.fail("implausible header: server " + std::to_string(c.server_rank) + " of " + std::to_string(c.num_servers) +
           ", step " + std::to_string(c.step) + ", " + std::to_string(c.state_floats) + " state floats");
  }
  const uint32_t n_tensors = r.get<uint32_t>("the tensor count");
  if (n_tensors > bytes.size()) r.fail("implausible tensor count " + std::to_string(n_tensors));
  for (uint32_t i = 0; i < n_tensors; ++i) {
    TensorSpec t;
    t.name = r.get_string("a tensor name", kMaxNameBytes);
    t.numel = r.get<uint64_t>("a tensor size");
    c.tensors.push_back(std::move(t));
  }
  SliceLayout layout;
  try {
    layout = SliceLayout(c.tensors, c.slice_bytes, c.num_servers);
  } catch (const Error& e) {
    r.fail(std::string("tensor list: ") + e.what());
  }
  if (layout.fingerprint() != c.layout_fingerprint) r.fail("the tensor list does not give the stored fingerprint");
  const uint32_t n_slices = r.get<uint32_t>("the slice count");
  std::vector<uint64_t> lengths;
  std::set<uint32_t> seen;
  for (uint32_t i = 0; i < n_slices && i <= layout.slices().size(); ++i) {
    CheckpointSlice s;
    s.id = r.get<uint32_t>("a slice id");
    s.version = r.get<int64_t>("a slice version");
    s.updates = r.get<int64_t>("a slice's update count");
    const uint64_t length = r.get<uint64_t>("a slice length");
    if (s.id >= layout.slices().size() || layout.slice(s.id).server != c.server_rank ||
        layout.slice(s.id).length != length || !seen.insert(s.id).second) {
      r.fail("slice table entry " + std::to_string(i) + " (slice " + std::to_string(s.id) + ", " +
             std::to_string(length) + " elements) does not belong to server " + std::to_string(c.server_rank) +
             " in this layout");
    }
    lengths.push_back(length);
    c.slices.push_back(std::move(s));
  }
  uint32_t expected = 0;
  for (const SliceInfo& s : layout.slices()) expected += s.server == c.server_rank ? 1 : 0;
  if (c.slices.size() != expected || n_slices != expected) {
    r.fail("the slice table lists " + std::to_string(n_slices) + " slices, server " + std::to_string(c.server_rank) +
           " owns " + std::to_string(expected));
  }
  for (size_t i = 0; i < c.slices.size(); ++i) {
    r.get_floats(&c.slices[i].weights, lengths[i], "slice weights");
    r.get_floats(&c.slices[i].opt_state, lengths[i] * c.state_floats, "optimizer state");
  }
  const uint32_t n_tables = version >= 3 ? r.get<uint32_t>("the table count") : 0;
  if (n_tables > kMaxTables) r.fail("implausible table count " + std::to_string(n_tables));
  for (uint32_t i = 0; i < n_tables; ++i) {
    CheckpointTable t;
    t.spec.name = r.get_string("a table name", kMaxNameBytes);
    t.spec.rows = r.get<uint64_t>("a table's rows");
    t.spec.dim = r.get<uint32_t>("a table's dim");
    const uint32_t init = r.get<uint32_t>("a table's init");
    t.spec.init_scale = r.get<float>("a table's init scale");
    const uint32_t flags = r.get<uint32_t>("a table's flags");  // bit 0: hashed; bit 1 (format 4): bf16 storage
    t.spec.admit_after = r.get<uint32_t>("a table's admission count");
    t.spec.expire_after = r.get<int64_t>("a table's expiry");
    if (flags > (version >= 4 ? 3u : 1u)) {
      r.fail("implausible flags " + std::to_string(flags) + " of embedding table " + std::to_string(i));
    }
    t.spec.hashed = (flags & 1u) != 0;
    t.spec.bf16 = (flags & 2u) != 0;
    t.seed = r.get<uint64_t>("a table's seed");
    t.version = r.get<int64_t>("a table's version");
    t.optimizer = r.get_string("a table's optimizer", kMaxNameBytes);
    t.state_floats = r.get<uint32_t>("a table's optimizer state size");
    if (init > static_cast<uint32_t>(TableInit::kZeros) || t.state_floats > 16 || t.version < 0) {
      r.fail("implausible entry for embedding table " + std::to_string(i) + " ('" + t.spec.name + "')");
    }
    t.spec.init = static_cast<TableInit>(init);
    try {
      check_table_specs({t.spec});
    } catch (const Error& e) {
      r.fail(e.what());
    }
    uint64_t rows = t.spec.hashed ? 0 : table_rows_on(t.spec.rows, c.num_servers, c.server_rank);
    const bool hashed_rows = t.spec.hashed && version >= 4;  // (version 3 kept no hashed rows)
    if (hashed_rows) {
      rows = r.get<uint64_t>("a hashed table's rows held");
      if (rows > table_rows_on(t.spec.rows, c.num_servers, c.server_rank) || rows > (r.size() - r.pos()) / 16) {
        r.fail("embedding table '" + t.spec.name + "' holds " + std::to_string(rows) +
               " rows, more than its capacity on this server or the file's size");
      }
      t.ids.resize(rows);
      t.last_steps.resize(rows);
      for (uint64_t& id : t.ids) id = r.get<uint64_t>("a hashed row's id");
      for (int64_t& step : t.last_steps) step = r.get<int64_t>("a hashed row's last step");
    }
    r.get_floats(&t.values, rows * t.spec.dim, "table rows");
    r.get_floats(&t.state, rows * t.spec.dim * t.state_floats, "table optimizer state");
    if (hashed_rows) {
      const uint64_t pending = r.get<uint64_t>("a hashed table's pending ids");
      if (pending > (r.size() - r.pos()) / 12) r.fail("implausible count of pending ids " + std::to_string(pending));
      t.pending.resize(pending);
      for (auto& [id, seen] : t.pending) {
        id = r.get<uint64_t>("a pending id");
        seen = r.get<uint32_t>("a pending id's steps");
      }
      t.admitted = r.get<uint64_t>("a hashed table's admitted rows");
      t.expired = r.get<uint64_t>("a hashed table's expired rows");
      t.not_admitted = r.get<uint64_t>("a hashed table's rows not admitted");
    }
    t.table = i;
    c.tables.push_back(std::move(t));
  }
  if (r.pos() + sizeof(uint32_t) != bytes.size()) {
    r.fail(std::to_string(bytes.size() - r.pos() - sizeof(uint32_t)) + " unexpected bytes before the CRC trailer");
  }
  return c;
}

std::string read_checkpoint_run_id(const std::string& path) {
  binary::Reader r("checkpoint " + path,
                   binary::read_file_prefix(path, "checkpoint", sizeof kMagic + 2 * sizeof(uint32_t) + kMaxRunIdBytes));
  char magic[sizeof kMagic];
  for (char& ch : magic) ch = r.get<char>("the magic number");
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0) r.fail("not a pshard checkpoint (bad magic number)");
  check_version(r, r.get<uint32_t>("the format version"));
  return r.get_string("the run id", kMaxRunIdBytes);
}

std::vector<int64_t> checkpoint_steps(const std::string& dir, uint32_t server_rank) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const int64_t k = step_of(entry.path().filename().string(), server_rank);
    if (k >= 0) steps.push_back(k);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

int64_t newest_complete_step(const std::string& dir, uint32_t num_servers, const std::string& run_id,
                             std::vector<std::string>* skipped) {
  std::vector<int64_t> candidates = checkpoint_steps(dir, 0);
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    bool complete = true;
    std::vector<uint32_t> missing;
    ServerCheckpoint any;  // the tensor list of this step, from a file that passed its check
    for (uint32_t s = 0; s < num_servers && complete; ++s) {
      const std::string path = checkpoint_path(dir, s, *it);
      if (!std::filesystem::exists(path)) {
        missing.push_back(s);
        continue;
      }
      try {
        ServerCheckpoint c = read_checkpoint(path);
        if (c.run_id != run_id) {
          throw Error("checkpoint " + path + ": belongs to run " + (c.run_id.empty() ? "(none)" : c.run_id) +
                      ", not to this run " + (run_id.empty() ? "(none)" : run_id) + "; ignored");
        }
        if (c.step != *it || c.server_rank != s || c.num_servers != num_servers) {
          throw Error("checkpoint " + path + ": holds server " + std::to_string(c.server_rank) + " of " +
                      std::to_string(c.num_servers) + " at step " + std::to_string(c.step) + ", the name says server " +
                      std::to_string(s) + " of " + std::to_string(num_servers) + " at step " + std::to_string(*it));
        }
        c.slices.clear();
        for (CheckpointTable& t : c.tables) t.values = t.state = {};
        any = std::move(c);
      } catch (const Error& e) {
        if (skipped) skipped->push_back(e.what());
        complete = false;
      }
    }
    // A server that owns no slices (and, in a job with tables, no rows) never sees a step close and writes no file:
    // it is not needed.
    if (complete && !missing.empty()) {
      const SliceLayout layout(any.tensors, any.slice_bytes, any.num_servers);
      for (uint32_t s : missing) complete = complete && layout.bytes_on_server(s) == 0 && any.tables.empty();
    }
    if (complete) return *it;
  }
  return -1;
}

void prune_checkpoints(const std::string& dir, uint32_t server_rank, int64_t keep, const std::string& run_id) {
  if (keep <= 0) return;
  std::vector<int64_t> steps;
  for (int64_t k : checkpoint_steps(dir, server_rank)) {
    try {
      if (read_checkpoint_run_id(checkpoint_path(dir, server_rank, k)) == run_id) steps.push_back(k);
    } catch (const Error&) {
      // Not this run's file (or not readable as one): never ours to delete.
    }
  }
  for (size_t i = 0; i + static_cast<size_t>(keep) < steps.size(); ++i) {
    std::error_code ec;
    std::filesystem::remove(checkpoint_path(dir, server_rank, steps[i]), ec);
  }
}

}  // namespace pshard
