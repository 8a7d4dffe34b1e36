// Encoding and structural validation of data-plane headers (see codec.h and docs/PROTOCOL.md).
#include "common/protocol/codec.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>

#include "common/compression/codec.h"
#include "common/error.h"

namespace pshard::protocol {
namespace {

constexpr uint64_t kMaxKeysPerMessage = 1u << 20;
constexpr uint64_t kMaxContributors = 1u << 16;  // worker ranks a push may sum (far beyond any host's workers)
constexpr uint64_t kMaxTables = 1u << 12;        // embedding tables in one tableInit

Decoded fail(Decoded d, ErrorCode code, std::string why) {
  d.ok = false;
  d.code = code;
  d.error = std::move(why);
  return d;
}

bool known_type(MessageType t) {
  return static_cast<uint16_t>(t) >= static_cast<uint16_t>(MessageType::PING) &&
         static_cast<uint16_t>(t) <= static_cast<uint16_t>(MessageType::ROWS);
}

// Gradients may use any codec; weights only the dense lossy ones (the servers' float32 master weights are what a
// worker reads back); init payloads and keys without a payload use none.
bool encoding_allowed(MessageType type, Encoding e) {
  if (!compression::known_encoding(e)) return false;
  if (type == MessageType::PUSH || type == MessageType::PUSH_PULL) return true;
  if (type == MessageType::WEIGHTS) return e == Encoding::NONE || e == Encoding::FP16 || e == Encoding::BF16;
  return e == Encoding::NONE;
}

std::string encoding_text(Encoding e) {
  return compression::known_encoding(e) ? compression::encoding_name(e)
                                        : "unknown(" + std::to_string(static_cast<unsigned>(e)) + ")";
}

// The shape of a table message (is_row_message), or of another that carries a table's fields: "" when it is sound.
// What only the server knows (the tables' sizes, its rows, the row limit) it checks itself.
std::string check_row_message(const Message& m, const FrameView* frames, size_t count) {
  const std::string what = type_name(m.type);
  if (!is_row_message(m.type)) return what + " carries a table's fields (tables, rowEncoding or rowOffset)";
  if (!m.keys.empty() || m.pull_encoding != Encoding::NONE || !m.contributors.empty()) {
    return what + " carries a tensor's fields (keys, pull encoding or contributors)";
  }
  // Through shared memory: a rowPull's or rowPush's float32 values are in the sender's row segment at rowOffset (the
  // ids stay in their frame), and the rows reply carries none.
  if (m.shared_memory && m.type == MessageType::TABLE_INIT) return "tableInit cannot be in shared memory";
  if (m.shared_memory && m.row_encoding != Encoding::NONE) {
    return what + " in shared memory has row encoding " + std::to_string(static_cast<unsigned>(m.row_encoding)) +
           ": shared memory carries float32 rows";
  }
  if (!m.shared_memory && m.row_offset != 0) return what + " has a row offset but is not in shared memory";
  if (m.type == MessageType::ROWS && m.row_offset != 0) return "rows has a row offset";
  if ((m.type == MessageType::TABLE_INIT) != !m.tables.empty()) {
    return m.type == MessageType::TABLE_INIT ? "tableInit lists no tables" : what + " lists tables";
  }
  if (m.type == MessageType::TABLE_INIT && m.row_encoding != Encoding::NONE) return "tableInit has a row encoding";
  if (row_value_bytes(m.row_encoding) == 0) {
    return what + ": row encoding " + std::to_string(static_cast<unsigned>(m.row_encoding)) +
           " is not one rows use (none or bf16)";
  }
  const size_t payloads = count - 1;
  size_t expected = m.type == MessageType::TABLE_INIT ? 0 : m.type == MessageType::ROW_PUSH ? 2 : 1;
  if (m.shared_memory && m.type != MessageType::ROW_PULL) --expected;  // rowPush: the ids alone; rows: nothing
  if (payloads != expected) {
    return what + " carries " + std::to_string(payloads) + " payload frames, expected " + std::to_string(expected);
  }
  if ((m.type == MessageType::ROW_PULL || m.type == MessageType::ROW_PUSH) && frames[1].size % sizeof(uint64_t) != 0) {
    return what + ": the row-id frame has " + std::to_string(frames[1].size) +
           " bytes, not a whole number of uint64 ids";
  }
  const size_t values = m.shared_memory ? 0 : m.type == MessageType::ROW_PUSH ? 2 : m.type == MessageType::ROWS ? 1 : 0;
  if (values > 0 && frames[values].size % row_value_bytes(m.row_encoding) != 0) {
    return what + ": the row-value frame has " + std::to_string(frames[values].size) +
           " bytes, not a whole number of values";
  }
  for (size_t i = 0; i < m.tables.size(); ++i) {
    const TableInfo& t = m.tables[i];
    if (t.name.empty() || t.rows == 0 || t.dim == 0 || t.rows > (uint64_t(1) << 62) / t.dim ||
        static_cast<uint16_t>(t.init) > static_cast<uint16_t>(TableInit::ZEROS) || !(t.init_scale >= 0.0f) ||
        !(t.init_scale < 1e30f) || t.expire_after < 0) {
      return "tableInit: table " + std::to_string(i) + " ('" + t.name + "': " + std::to_string(t.rows) + " x " +
             std::to_string(t.dim) + ") is not a valid table (a name, rows and dim > 0, a known init, a finite " +
             "init scale >= 0)";
    }
  }
  return "";
}

std::string key_name(size_t i, const KeyRef& k) {
  return "key " + std::to_string(i) + " (tensor " + std::to_string(k.tensor) + ", slice " + std::to_string(k.slice) +
         ")";
}

}  // namespace

bool carries_payloads(MessageType type) {
  return type == MessageType::INIT || type == MessageType::PUSH || type == MessageType::PUSH_PULL ||
         type == MessageType::WEIGHTS;
}

bool is_row_message(MessageType type) {
  return type == MessageType::TABLE_INIT || type == MessageType::ROW_PULL || type == MessageType::ROW_PUSH ||
         type == MessageType::ROWS;
}

size_t row_value_bytes(Encoding e) {
  if (e == Encoding::NONE) return sizeof(float);
  if (e == Encoding::BF16) return 2;
  return 0;
}

bool reads_weights(MessageType type) {
  return type == MessageType::PULL || type == MessageType::PUSH_PULL || type == MessageType::JOIN;
}

MessageType reply_type(MessageType type) {
  if (reads_weights(type)) return MessageType::WEIGHTS;
  if (type == MessageType::ROW_PULL) return MessageType::ROWS;
  return type == MessageType::PING ? MessageType::PONG : MessageType::ACK;
}

Message reply_header(const Message& request, uint32_t server_rank) {
  Message m;
  m.type = reply_type(request.type);
  m.request_id = request.request_id;
  m.sender_role = Role::SERVER;
  m.sender_rank = server_rank;
  return m;
}

std::string sender_name(const Message& msg) {
  std::string name = "worker " + std::to_string(msg.sender_rank);
  if (msg.contributors.size() > 1) {
    name += " (the sum of workers ";
    for (size_t i = 0; i < msg.contributors.size(); ++i) {
      name += (i ? ", " : "") + std::to_string(msg.contributors[i]);
    }
    name += ")";
  }
  return name;
}

const char* type_name(MessageType type) {
  switch (type) {
    case MessageType::INVALID: return "invalid";
    case MessageType::PING: return "ping";
    case MessageType::PONG: return "pong";
    case MessageType::INIT: return "init";
    case MessageType::PUSH: return "push";
    case MessageType::PULL: return "pull";
    case MessageType::PUSH_PULL: return "pushPull";
    case MessageType::ACK: return "ack";
    case MessageType::WEIGHTS: return "weights";
    case MessageType::ERROR: return "error";
    case MessageType::SHUTDOWN: return "shutdown";
    case MessageType::JOIN: return "join";
    case MessageType::TABLE_INIT: return "tableInit";
    case MessageType::ROW_PULL: return "rowPull";
    case MessageType::ROW_PUSH: return "rowPush";
    case MessageType::ROWS: return "rows";
  }
  return "unknown";
}

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::NONE: return "none";
    case ErrorCode::BAD_HEADER: return "badHeader";
    case ErrorCode::UNKNOWN_TYPE: return "unknownType";
    case ErrorCode::BAD_TOKEN: return "badToken";
    case ErrorCode::BAD_SENDER: return "badSender";
    case ErrorCode::UNKNOWN_KEY: return "unknownKey";
    case ErrorCode::WRONG_SERVER: return "wrongServer";
    case ErrorCode::WRONG_LENGTH: return "wrongLength";
    case ErrorCode::WRONG_PAYLOAD_COUNT: return "wrongPayloadCount";
    case ErrorCode::BAD_DTYPE: return "badDtype";
    case ErrorCode::LAYOUT_MISMATCH: return "layoutMismatch";
    case ErrorCode::NOT_INITIALIZED: return "notInitialized";
    case ErrorCode::ALREADY_INITIALIZED: return "alreadyInitialized";
    case ErrorCode::BAD_STEP: return "badStep";
    case ErrorCode::DUPLICATE_PUSH: return "duplicatePush";
    case ErrorCode::WORKER_DEAD: return "workerDead";
    case ErrorCode::DUPLICATE_KEY: return "duplicateKey";
    case ErrorCode::OVERLOADED: return "overloaded";
    case ErrorCode::INTERNAL: return "internal";
    case ErrorCode::STALLED: return "stalled";
    case ErrorCode::BAD_ENCODING: return "badEncoding";
    case ErrorCode::NON_FINITE_GRADIENT: return "nonFiniteGradient";
    case ErrorCode::UNKNOWN_TABLE: return "unknownTable";
    case ErrorCode::BAD_ROW: return "badRow";
    case ErrorCode::DUPLICATE_ROW: return "duplicateRow";
    case ErrorCode::TOO_MANY_ROWS: return "tooManyRows";
    case ErrorCode::ROW_NOT_PULLED: return "rowNotPulled";
  }
  return "unknown";
}

std::string encode_header(const Message& msg) {
  capnp::MallocMessageBuilder builder;
  auto h = builder.initRoot<wire::Header>();
  h.setType(msg.type);
  h.setRequestId(msg.request_id);
  h.setJobToken(msg.job_token);
  h.setSenderRole(msg.sender_role);
  h.setSenderRank(msg.sender_rank);
  h.setStep(msg.step);
  h.setLayoutFingerprint(msg.layout_fingerprint);
  if (!msg.keys.empty()) {
    auto keys = h.initKeys(static_cast<unsigned>(msg.keys.size()));
    for (size_t i = 0; i < msg.keys.size(); ++i) {
      keys[i].setTensor(msg.keys[i].tensor);
      keys[i].setSlice(msg.keys[i].slice);
      keys[i].setOffset(msg.keys[i].offset);
      keys[i].setLength(msg.keys[i].length);
      keys[i].setDtype(msg.keys[i].dtype);
      keys[i].setEncoding(msg.keys[i].encoding);
    }
  }
  if (!msg.tensors.empty()) {
    auto tensors = h.initTensors(static_cast<unsigned>(msg.tensors.size()));
    for (size_t i = 0; i < msg.tensors.size(); ++i) {
      tensors[i].setName(msg.tensors[i].name);
      tensors[i].setNumel(msg.tensors[i].numel);
    }
  }
  h.setSliceBytes(msg.slice_bytes);
  h.setNumServers(msg.num_servers);
  h.setRunTotalSteps(msg.run_total_steps);
  h.setCheckpoint(msg.checkpoint);
  h.setPullEncoding(msg.pull_encoding);
  h.setSharedMemory(msg.shared_memory);
  h.setStop(msg.stop);
  h.setStopAt(msg.stop_at);
  h.setCheckpointAt(msg.checkpoint_at);
  h.setLate(msg.late);
  h.setWeightsStep(msg.weights_step);
  h.setSkipped(msg.skipped);
  if (!msg.contributors.empty()) {
    auto ranks = h.initContributors(static_cast<unsigned>(msg.contributors.size()));
    for (size_t i = 0; i < msg.contributors.size(); ++i) ranks.set(static_cast<unsigned>(i), msg.contributors[i]);
  }
  if (!msg.tables.empty()) {
    auto tables = h.initTables(static_cast<unsigned>(msg.tables.size()));
    for (size_t i = 0; i < msg.tables.size(); ++i) {
      tables[i].setName(msg.tables[i].name);
      tables[i].setRows(msg.tables[i].rows);
      tables[i].setDim(msg.tables[i].dim);
      tables[i].setInit(msg.tables[i].init);
      tables[i].setInitScale(msg.tables[i].init_scale);
      tables[i].setHashed(msg.tables[i].hashed);
      tables[i].setAdmitAfter(msg.tables[i].admit_after);
      tables[i].setExpireAfter(msg.tables[i].expire_after);
      tables[i].setBf16(msg.tables[i].bf16);
    }
  }
  h.setTable(msg.table);
  h.setTableSeed(msg.table_seed);
  h.setRowEncoding(msg.row_encoding);
  h.setRowOffset(msg.row_offset);
  h.setErrorCode(msg.error_code);
  if (!msg.error_message.empty()) h.setErrorMessage(msg.error_message);
  kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  auto bytes = words.asBytes();
  if (bytes.size() > kMaxHeaderBytes) {
    throw Error(std::string(type_name(msg.type)) + " header of " + std::to_string(bytes.size()) + " bytes (" +
                std::to_string(msg.keys.size()) + " keys, " + std::to_string(msg.tensors.size()) +
                " tensors) exceeds the protocol's limit of " + std::to_string(kMaxHeaderBytes) + " bytes");
  }
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

Decoded decode(const FrameView* frames, size_t count) {
  Decoded d;
  if (count == 0 || frames == nullptr) return fail(std::move(d), ErrorCode::BAD_HEADER, "message has no header frame");
  const FrameView& hf = frames[0];
  if (hf.size == 0 || hf.size % sizeof(capnp::word) != 0) {
    return fail(std::move(d), ErrorCode::BAD_HEADER,
                "header frame of " + std::to_string(hf.size) + " bytes is not a whole number of 8-byte words");
  }
  std::vector<capnp::word> aligned;
  const capnp::word* words = static_cast<const capnp::word*>(hf.data);
  if (reinterpret_cast<uintptr_t>(hf.data) % alignof(capnp::word) != 0) {
    aligned = std::vector<capnp::word>(hf.size / sizeof(capnp::word));  // not resize(): clang's word is not movable
    std::memcpy(aligned.data(), hf.data, hf.size);
    words = aligned.data();
  }
  Message& m = d.message;
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = 8u << 20;  // 64 MiB of header is far beyond any real one
    options.nestingLimit = 16;
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(words, hf.size / sizeof(capnp::word)), options);
    auto h = reader.getRoot<wire::Header>();
    m.request_id = h.getRequestId();
    m.type = h.getType();
    m.job_token = h.getJobToken().cStr();
    m.sender_role = h.getSenderRole();
    m.sender_rank = h.getSenderRank();
    m.step = h.getStep();
    m.layout_fingerprint = h.getLayoutFingerprint();
    m.slice_bytes = h.getSliceBytes();
    m.num_servers = h.getNumServers();
    m.run_total_steps = h.getRunTotalSteps();
    m.checkpoint = h.getCheckpoint();
    m.pull_encoding = h.getPullEncoding();
    m.shared_memory = h.getSharedMemory();
    m.stop = h.getStop();
    m.stop_at = h.getStopAt();
    m.checkpoint_at = h.getCheckpointAt();
    m.late = h.getLate();
    m.weights_step = h.getWeightsStep();
    m.skipped = h.getSkipped();
    auto contributors = h.getContributors();
    if (contributors.size() > kMaxContributors) {
      return fail(std::move(d), ErrorCode::BAD_HEADER,
                  "header lists " + std::to_string(contributors.size()) + " contributors");
    }
    m.contributors.reserve(contributors.size());
    for (uint32_t r : contributors) m.contributors.push_back(r);
    m.error_code = h.getErrorCode();
    if (h.hasErrorMessage()) m.error_message = h.getErrorMessage().cStr();
    auto keys = h.getKeys();
    if (keys.size() > kMaxKeysPerMessage) {
      return fail(std::move(d), ErrorCode::BAD_HEADER, "header lists " + std::to_string(keys.size()) + " keys");
    }
    m.keys.reserve(keys.size());
    for (auto k : keys) {
      m.keys.push_back({k.getTensor(), k.getSlice(), k.getOffset(), k.getLength(), k.getDtype(), k.getEncoding()});
    }
    auto tensors = h.getTensors();
    m.tensors.reserve(tensors.size());
    for (auto t : tensors) m.tensors.push_back({t.getName().cStr(), t.getNumel()});
    auto tables = h.getTables();
    if (tables.size() > kMaxTables) {
      return fail(std::move(d), ErrorCode::BAD_HEADER, "header lists " + std::to_string(tables.size()) + " tables");
    }
    m.tables.reserve(tables.size());
    for (auto t : tables) {
      m.tables.push_back({t.getName().cStr(), t.getRows(), t.getDim(), t.getInit(), t.getInitScale(), t.getHashed(),
                          t.getAdmitAfter(), t.getExpireAfter(), t.getBf16()});
    }
    m.table = h.getTable();
    m.table_seed = h.getTableSeed();
    m.row_encoding = h.getRowEncoding();
    m.row_offset = h.getRowOffset();
  } catch (const kj::Exception& e) {
    return fail(std::move(d), ErrorCode::BAD_HEADER,
                std::string("header frame is not a valid Header: ") + e.getDescription().cStr());
  }

  if (!known_type(m.type)) {
    return fail(std::move(d), ErrorCode::UNKNOWN_TYPE,
                "unknown message type " + std::to_string(static_cast<unsigned>(m.type)));
  }
  const size_t payloads = count - 1;
  if (m.skipped && m.type != MessageType::PUSH && m.type != MessageType::PUSH_PULL && m.type != MessageType::WEIGHTS) {
    return fail(std::move(d), ErrorCode::BAD_HEADER,
                std::string(type_name(m.type)) + " says skipped, which only a push, a pushPull or a weights reply can");
  }
  if (is_row_message(m.type) || !m.tables.empty() || m.row_encoding != Encoding::NONE || m.row_offset != 0) {
    std::string why = check_row_message(m, frames, count);
    if (!why.empty()) return fail(std::move(d), ErrorCode::BAD_HEADER, std::move(why));
    m.payloads.assign(frames + 1, frames + count);
    d.ok = true;
    return d;
  }
  if (m.shared_memory) {
    const bool allowed = m.type == MessageType::PUSH || m.type == MessageType::PUSH_PULL ||
                         m.type == MessageType::PULL || m.type == MessageType::JOIN || m.type == MessageType::WEIGHTS;
    if (!allowed) {
      return fail(std::move(d), ErrorCode::BAD_HEADER,
                  std::string(type_name(m.type)) + " cannot have its payloads in shared memory");
    }
    if (payloads != 0) {
      return fail(std::move(d), ErrorCode::WRONG_PAYLOAD_COUNT,
                  std::string(type_name(m.type)) + " with its payloads in shared memory carries " +
                      std::to_string(payloads) + " payload frames");
    }
    if (m.keys.empty()) {
      return fail(std::move(d), ErrorCode::WRONG_PAYLOAD_COUNT, std::string(type_name(m.type)) + " lists no keys");
    }
    for (size_t i = 0; i < m.keys.size(); ++i) {
      if (m.keys[i].encoding != Encoding::NONE) {
        // The text first: fail() takes `d`, and with it the keys `m` refers to.
        std::string why = key_name(i, m.keys[i]) + ": shared memory holds float32 only (encoding none)";
        return fail(std::move(d), ErrorCode::BAD_ENCODING, std::move(why));
      }
    }
    if (m.pull_encoding != Encoding::NONE) {
      return fail(std::move(d), ErrorCode::BAD_ENCODING,
                  "shared memory holds float32 weights only (pull encoding none)");
    }
  } else if (carries_payloads(m.type)) {
    if (m.keys.empty()) {
      return fail(std::move(d), ErrorCode::WRONG_PAYLOAD_COUNT, std::string(type_name(m.type)) + " lists no keys");
    }
    if (payloads != m.keys.size()) {
      return fail(std::move(d), ErrorCode::WRONG_PAYLOAD_COUNT,
                  std::string(type_name(m.type)) + " lists " + std::to_string(m.keys.size()) + " keys but carries " +
                      std::to_string(payloads) + " payload frames");
    }
  } else if (payloads != 0) {
    return fail(std::move(d), ErrorCode::WRONG_PAYLOAD_COUNT,
                std::string(type_name(m.type)) + " must carry no payload frames, got " + std::to_string(payloads));
  }
  if ((m.type == MessageType::PULL || m.type == MessageType::JOIN) && m.keys.empty()) {
    return fail(std::move(d), ErrorCode::WRONG_PAYLOAD_COUNT, std::string(type_name(m.type)) + " lists no keys");
  }
  for (size_t i = 0; i < m.keys.size(); ++i) {
    const KeyRef& k = m.keys[i];
    if (k.dtype != DType::FLOAT32) {
      return fail(std::move(d), ErrorCode::BAD_DTYPE,
                  key_name(i, k) + ": dtype " + std::to_string(static_cast<unsigned>(k.dtype)) +
                      " is not supported (float32 only)");
    }
    if (k.length == 0 || k.length > (UINT64_MAX / sizeof(float))) {
      return fail(std::move(d), ErrorCode::WRONG_LENGTH, key_name(i, k) + ": length " + std::to_string(k.length));
    }
    if (k.encoding != Encoding::NONE && !encoding_allowed(m.type, k.encoding)) {
      return fail(
          std::move(d), ErrorCode::BAD_ENCODING,
          key_name(i, k) + ": encoding " + encoding_text(k.encoding) + " is not allowed in " + type_name(m.type));
    }
    if (carries_payloads(m.type) && !m.shared_memory && k.encoding == Encoding::NONE &&
        frames[i + 1].size != k.length * sizeof(float)) {
      return fail(std::move(d), ErrorCode::WRONG_LENGTH,
                  key_name(i, k) + ": payload frame has " + std::to_string(frames[i + 1].size) + " bytes, expected " +
                      std::to_string(k.length * sizeof(float)) + " (" + std::to_string(k.length) + " float32)");
    }
    if (carries_payloads(m.type) && !m.shared_memory && k.encoding != Encoding::NONE) {
      const compression::CheckResult c =
          compression::check_encoded(k.encoding, frames[i + 1].data, frames[i + 1].size, k.length);
      if (!c.ok()) {
        return fail(
            std::move(d),
            c.kind == compression::CheckResult::kWrongLength ? ErrorCode::WRONG_LENGTH : ErrorCode::BAD_ENCODING,
            key_name(i, k) + ": " + c.why);
      }
    }
  }
  const bool reads = reads_weights(m.type);
  if (m.pull_encoding != Encoding::NONE && !(reads && encoding_allowed(MessageType::WEIGHTS, m.pull_encoding))) {
    return fail(std::move(d), ErrorCode::BAD_ENCODING,
                std::string("pull encoding ") + encoding_text(m.pull_encoding) + " is not allowed in " +
                    type_name(m.type) + " (pull, pushPull and join may ask for fp16 or bf16)");
  }
  if (m.type == MessageType::INIT) {
    if (m.tensors.empty()) return fail(std::move(d), ErrorCode::BAD_HEADER, "init carries no tensor list");
    if (m.slice_bytes < sizeof(float) || m.num_servers == 0) {
      return fail(std::move(d), ErrorCode::BAD_HEADER,
                  "init carries slice_bytes " + std::to_string(m.slice_bytes) + " and num_servers " +
                      std::to_string(m.num_servers));
    }
  }
  m.payloads.assign(frames + 1, frames + count);
  d.ok = true;
  return d;
}

}  // namespace pshard::protocol
