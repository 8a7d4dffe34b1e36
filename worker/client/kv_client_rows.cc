// KvClient's embedding-table requests: the tables' declaration, and row pulls and pushes split by the rows' servers.
#include <cstring>
#include <unordered_set>

#include "common/compression/codec.h"
#include "common/transport/frames.h"
#include "worker/client/kv_client_impl.h"

namespace pshard {

using kv_client_detail::Op;
using kv_client_detail::Part;
using protocol::MessageType;

namespace {

protocol::Encoding row_push_encoding(const compression::Settings& c) {
  return c.push == protocol::Encoding::BF16 ? protocol::Encoding::BF16 : protocol::Encoding::NONE;
}
protocol::Encoding row_pull_encoding(const compression::Settings& c) {
  return c.pull == protocol::Encoding::BF16 ? protocol::Encoding::BF16 : protocol::Encoding::NONE;
}

protocol::TableInit wire_init(TableInit i) {
  return i == TableInit::kUniform ? protocol::TableInit::UNIFORM
         : i == TableInit::kZeros ? protocol::TableInit::ZEROS
                                  : protocol::TableInit::NORMAL;
}

}  // namespace

KvClient::Handle KvClient::declare_tables(const std::vector<TableSpec>& tables, uint64_t seed) {
  check_table_specs(tables);
  if (tables.empty()) throw Error("worker " + std::to_string(impl_->opt.rank) + ": no embedding tables to declare");
  impl_->tables = tables;
  protocol::Message m;
  m.type = MessageType::TABLE_INIT;
  m.job_token = impl_->opt.job_token;
  m.sender_role = protocol::Role::WORKER;
  m.sender_rank = impl_->opt.rank;
  m.table_seed = seed;
  for (const TableSpec& t : tables) {
    m.tables.push_back(
        {t.name, t.rows, t.dim, wire_init(t.init), t.init_scale, t.hashed, t.admit_after, t.expire_after, t.bf16});
  }
  auto op = std::make_shared<Op>();
  op->remaining = static_cast<int>(impl_->opt.servers.size());
  std::vector<Part> parts;
  for (uint32_t s = 0; s < impl_->opt.servers.size(); ++s) {
    Part p;
    p.server = s;
    p.request_id = impl_->next_request++;
    p.type = MessageType::TABLE_INIT;
    p.what = "tableInit of " + std::to_string(tables.size()) + " tables";
    p.op = op;
    p.deadline = Impl::Clock::now() + impl_->opt.request_timeout;
    m.request_id = p.request_id;
    p.frames.push_back(transport::copy_frame(protocol::encode_header(m)));
    parts.push_back(std::move(p));
  }
  return impl_->dispatch(op, parts);
}

const std::vector<TableSpec>& KvClient::tables() const { return impl_->tables; }

std::vector<Part> KvClient::Impl::row_parts(MessageType type, uint32_t table, const uint64_t* ids, size_t n,
                                            int64_t step, bool every_server, const std::shared_ptr<Op>& op) {
  const std::string who = "worker " + std::to_string(opt.rank);
  if (table >= tables.size()) {
    throw Error(who + ": embedding table " + std::to_string(table) + " does not exist (" +
                std::to_string(tables.size()) + " declared)");
  }
  const TableSpec& spec = tables[table];
  const uint32_t servers = static_cast<uint32_t>(opt.servers.size());
  std::vector<std::vector<size_t>> positions(servers);
  // Distinct ids: ascending ids (a batch's distinct ids, as the trainer and the Python modules list them) are checked
  // by one comparison each; others through a set.
  bool ascending = true;
  for (size_t i = 0; i < n; ++i) {
    if (!spec.hashed && ids[i] >= spec.rows) {
      throw Error(who + ": row " + std::to_string(ids[i]) + " is outside embedding table " + describe_table(spec));
    }
    if (i > 0 && ids[i] <= ids[i - 1]) ascending = false;
    positions[table_server(ids[i], servers)].push_back(i);
  }
  if (!ascending) {
    std::unordered_set<uint64_t> seen;
    seen.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (!seen.insert(ids[i]).second) {
        throw Error(who + ": row " + std::to_string(ids[i]) + " of embedding table " + spec.name + " is listed twice");
      }
    }
  }
  std::vector<Part> parts;
  for (uint32_t s = 0; s < servers; ++s) {
    if (positions[s].empty() && !every_server) continue;
    Part p;
    p.server = s;
    p.request_id = next_request++;
    p.type = type;
    p.what = std::string(protocol::type_name(type)) + " of table " + spec.name + " (" +
             std::to_string(positions[s].size()) + " rows)";
    p.op = op;
    p.deadline = Clock::now() + opt.request_timeout;
    p.row_dim = spec.dim;
    protocol::Message m;
    m.type = type;
    m.request_id = p.request_id;
    m.job_token = opt.job_token;
    m.sender_role = protocol::Role::WORKER;
    m.sender_rank = opt.rank;
    m.step = step;
    m.table = table;
    // Sync checkpoints and the stop at one (request_checkpoint, request_stop): a table's step asks as the dense ones.
    m.checkpoint = type == MessageType::ROW_PUSH && step == checkpoint_step.load();
    m.stop = type == MessageType::ROW_PUSH && step == stop_step.load();
    m.row_encoding =
        type == MessageType::ROW_PUSH ? row_push_encoding(opt.compression) : row_pull_encoding(opt.compression);
    // float32 values through shared memory with a server on this host, when its row segment has room for them.
    const size_t value_bytes = positions[s].size() * spec.dim * sizeof(float);
    if (m.row_encoding == protocol::Encoding::NONE && value_bytes > 0) p.row_region = links.row_region(s, value_bytes);
    if (p.row_region) {
      m.shared_memory = true;
      m.row_offset = static_cast<uint64_t>(p.row_region->offset);
    }
    p.frames.push_back(transport::copy_frame(protocol::encode_header(m)));
    zmq::message_t id_frame(positions[s].size() * sizeof(uint64_t));
    auto* out = static_cast<uint64_t*>(id_frame.data());
    for (size_t k = 0; k < positions[s].size(); ++k) out[k] = ids[positions[s][k]];
    counts.bytes_sent += id_frame.size();
    p.frames.push_back(std::move(id_frame));
    p.row_positions = std::move(positions[s]);
    parts.push_back(std::move(p));
  }
  op->remaining = static_cast<int>(parts.size());
  return parts;
}

KvClient::Handle KvClient::row_pull(uint32_t table, const uint64_t* ids, size_t n, float* out, int64_t step) {
  auto op = std::make_shared<Op>();
  std::vector<Part> parts = impl_->row_parts(MessageType::ROW_PULL, table, ids, n, step, false, op);
  for (Part& p : parts) p.row_out = out;
  return impl_->dispatch(op, parts);
}

KvClient::Handle KvClient::row_push(uint32_t table, const uint64_t* ids, size_t n, const float* grads, int64_t step) {
  auto op = std::make_shared<Op>();
  std::vector<Part> parts = impl_->row_parts(MessageType::ROW_PUSH, table, ids, n, step, true, op);
  const uint32_t dim = impl_->tables[table].dim;
  const protocol::Encoding enc = row_push_encoding(impl_->opt.compression);
  std::vector<float> values;
  for (Part& p : parts) {
    const size_t count = p.row_positions.size() * dim;
    if (p.row_region) {  // the rows' gradients into the row segment
      auto* out = reinterpret_cast<float*>(p.row_region->data);
      for (size_t k = 0; k < p.row_positions.size(); ++k) {
        std::memcpy(out + k * dim, grads + p.row_positions[k] * dim, dim * sizeof(float));
      }
      impl_->counts.shm_bytes_sent += count * sizeof(float);
      impl_->counts.fp32_bytes_sent += count * sizeof(float);
      continue;
    }
    zmq::message_t frame;
    if (enc == protocol::Encoding::NONE) {  // the rows' gradients straight into the frame
      frame = zmq::message_t(count * sizeof(float));
      auto* out = static_cast<float*>(frame.data());
      for (size_t k = 0; k < p.row_positions.size(); ++k) {
        std::memcpy(out + k * dim, grads + p.row_positions[k] * dim, dim * sizeof(float));
      }
    } else {
      values.resize(count);
      for (size_t k = 0; k < p.row_positions.size(); ++k) {
        std::memcpy(values.data() + k * dim, grads + p.row_positions[k] * dim, dim * sizeof(float));
      }
      auto codec = compression::make_codec({enc});
      zmq::message_t encoded(codec->max_encoded_bytes(values.size()));
      const size_t bytes = codec->encode(values.data(), values.size(), static_cast<uint8_t*>(encoded.data()));
      frame = zmq::message_t(encoded.data(), bytes);
    }
    impl_->counts.bytes_sent += frame.size();
    impl_->counts.fp32_bytes_sent += count * sizeof(float);
    p.frames.push_back(std::move(frame));
  }
  const Handle h = impl_->dispatch(op, parts);
  impl_->count_push(step);
  return h;
}

std::string KvClient::Impl::take_rows(const Part& p, const protocol::Message& m) {
  const std::string who = "worker " + std::to_string(opt.rank) + ": " + server_name(p.server);
  const size_t values = p.row_positions.size() * p.row_dim;
  const size_t row_bytes = p.row_dim * sizeof(float);
  if (m.shared_memory != (p.row_region != nullptr)) {
    return who + " answered " + p.what + (m.shared_memory ? " through" : " not through") + " shared memory";
  }
  if (m.shared_memory) {  // the server wrote the float32 rows into this request's region
    for (size_t k = 0; k < p.row_positions.size(); ++k) {
      std::memcpy(p.row_out + p.row_positions[k] * p.row_dim, p.row_region->data + k * row_bytes, row_bytes);
    }
    counts.shm_bytes_recv += values * sizeof(float);
    counts.fp32_bytes_recv += values * sizeof(float);
    return "";
  }
  const size_t vb = protocol::row_value_bytes(m.row_encoding);
  if (m.payloads.size() != 1 || vb == 0 || m.payloads[0].size != values * vb) {
    return who + " answered " + p.what + " with " +
           (m.payloads.empty() ? std::string("no rows") : std::to_string(m.payloads[0].size) + " bytes") +
           ", expected " + std::to_string(values * sizeof(float)) + " bytes of float32 (or half that of bf16)";
  }
  const uint8_t* rows = static_cast<const uint8_t*>(m.payloads[0].data);  // float32 rows: copied straight from it
  std::vector<float> decoded;
  if (m.row_encoding != protocol::Encoding::NONE) {
    decoded.resize(values);
    if (values > 0)
      compression::decode_encoded(m.row_encoding, m.payloads[0].data, m.payloads[0].size, values, decoded.data());
    rows = reinterpret_cast<const uint8_t*>(decoded.data());
  }
  for (size_t k = 0; k < p.row_positions.size(); ++k) {
    std::memcpy(p.row_out + p.row_positions[k] * p.row_dim, rows + k * row_bytes, row_bytes);
  }
  counts.bytes_recv += m.payloads[0].size;
  counts.fp32_bytes_recv += values * sizeof(float);
  return "";
}

}  // namespace pshard
