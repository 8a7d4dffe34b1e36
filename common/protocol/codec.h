// Data-plane message codec: Header encoding, and a pure decoder that turns raw frames into a checked Message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/protocol/pshard.capnp.h"

namespace pshard::protocol {

using wire::DType;
using wire::Encoding;
using wire::ErrorCode;
using wire::MessageType;
using wire::Role;
using wire::TableInit;

// Bytes of one received frame; not owned.
struct FrameView {
  const void* data = nullptr;
  size_t size = 0;
};

struct KeyRef {
  uint32_t tensor = 0;
  uint32_t slice = 0;
  uint64_t offset = 0;  // elements
  uint64_t length = 0;  // elements
  DType dtype = DType::FLOAT32;
  Encoding encoding = Encoding::NONE;  // of the payload frame (common/compression/)
};

struct TensorInfo {
  std::string name;
  uint64_t numel = 0;
};

// One embedding table of a tableInit (pshard.capnp's TableInfo).
struct TableInfo {
  std::string name;
  uint64_t rows = 0;
  uint32_t dim = 0;
  TableInit init = TableInit::NORMAL;
  float init_scale = 0.0f;
  bool hashed = false;
  uint32_t admit_after = 0;
  int64_t expire_after = 0;
  bool bf16 = false;
};

// A message as the schema describes it (see pshard.capnp for each field's meaning).
struct Message {
  MessageType type = MessageType::INVALID;
  uint64_t request_id = 0;
  std::string job_token;
  Role sender_role = Role::WORKER;
  uint32_t sender_rank = 0;
  int64_t step = 0;
  uint64_t layout_fingerprint = 0;
  uint64_t slice_bytes = 0;                 // init only
  uint32_t num_servers = 0;                 // init only
  int64_t run_total_steps = 0;              // init only: 0 = unknown
  bool checkpoint = false;                  // push/pushPull: checkpoint the keys at step boundary step + 1
  Encoding pull_encoding = Encoding::NONE;  // pull/pushPull/join: how the reply encodes the weights
  bool shared_memory = false;               // payloads in shared memory, not in frames (sharedMemory)
  bool stop = false;                        // push/pushPull: the job stops at step boundary step + 1
  int64_t checkpoint_at = 0;                // weights replies: > 0, the latest boundary a push asked to checkpoint at
  int64_t stop_at = 0;                      // weights replies: > 0, the step boundary the servers stopped the job at
  bool late = false;                        // push/pushPull replies: a key's gradient came after its step closed
  int64_t weights_step = 0;                 // weights replies: the lowest version among the keys' weights
  bool skipped = false;                     // push/pushPull: not finite, skip the step; weights replies: it was skipped
  std::vector<uint32_t> contributors;       // push/pushPull: the ranks each payload sums (empty: the sender alone)
  std::vector<KeyRef> keys;
  std::vector<TensorInfo> tensors;         // init only
  std::vector<TableInfo> tables;           // tableInit only
  uint32_t table = 0;                      // rowPull/rowPush/rows: the table's id
  uint64_t table_seed = 0;                 // tableInit only
  Encoding row_encoding = Encoding::NONE;  // rowPush: frame 1's encoding; rowPull/rows: the reply's (none or bf16)
  uint64_t row_offset = 0;                 // rowPull/rowPush with shared_memory: the values' offset (rowOffset)
  ErrorCode error_code = ErrorCode::NONE;
  std::string error_message;
  std::vector<FrameView> payloads;  // decode(): views into the payload frames, one per key
};

// Outcome of decode(). On failure `message` holds what could be read (request_id, type) so
// that an error reply can echo it.
struct Decoded {
  bool ok = false;
  Message message;
  ErrorCode code = ErrorCode::NONE;
  std::string error;  // what was wrong, naming the frame / key / field
};

// The largest header frame a peer accepts (ZMQ_MAXMSGSIZE, common/transport/bounds.h): 2^18 keys
// (SliceLayout::kMaxSlices) of 32 bytes are 8 MiB; an init's tensor list gets the other 8 MiB.
constexpr size_t kMaxHeaderBytes = size_t(16) << 20;

// Serialises msg's header fields (not the payloads) into Cap'n Proto flat-array bytes. Throws pshard::Error
// when the header would exceed kMaxHeaderBytes (the receiver would drop the connection).
std::string encode_header(const Message& msg);

// Decodes frames[0] as a Header and checks the structure, without copying payloads:
// a known type, a payload count that matches the keys (for the tables' messages: no keys, a tableInit with tables,
// row ids that are whole uint64s and row values that are whole values of none or bf16) (0 for pull/ack/error/ping/...,
// and for messages whose payloads are in shared memory: push, pushPull and weights with encoding none only), float32
// keys with length > 0 whose frames are valid encodings of `length` values (length * 4 bytes for
// encoding none; any codec for push/pushPull, none/fp16/bf16 for weights, none for everything
// else; sparse indices in range and increasing), a pull encoding of none/fp16/bf16 on reads and
// none elsewhere, an init tensor list, and the skipped flag on pushes and weights replies only. The header
// is read in place when its address is 8-byte aligned, else from an aligned copy. A pure
// function of its input: safe to call on arbitrary bytes (a fuzzer's entry point).
//
//   FrameView frames[] = {{hdr.data(), hdr.size()}, {payload.data(), payload.size()}};
//   Decoded d = decode(frames, 2);
//   if (!d.ok) reply_error(d.message.request_id, d.code, d.error);
Decoded decode(const FrameView* frames, size_t count);

// True for types that carry one payload frame per key.
bool carries_payloads(MessageType type);
// True for the embedding tables' messages (tableInit, rowPull, rowPush, rows): no keys; their frames are row ids and
// row values (pshard.capnp), which decode() checks for shape and the server against its tables.
bool is_row_message(MessageType type);
// Bytes one value takes in a row frame encoded as `e` (none: 4, bf16: 2); 0 for an encoding rows do not use.
size_t row_value_bytes(Encoding e);
// True for the requests answered with the weights of their keys: pull, pushPull and join.
bool reads_weights(MessageType type);
// The type of a server's answer to a request of `type` that it did not refuse: weights for reads_weights(), pong
// for ping, ack for the rest (init, push, shutdown).
MessageType reply_type(MessageType type);
// A server's answer to `request` without keys: reply_type(request.type), its request id, and the server as sender.
//
//   Message m = reply_header(request, rank);
//   m.step = store.max_version();
//   send(encode_header(m));
Message reply_header(const Message& request, uint32_t server_rank);
// "worker 2", or "worker 2 (the sum of workers 2, 3)" for a push that names contributors.
std::string sender_name(const Message& msg);
const char* type_name(MessageType type);      // "push", ...; "unknown(17)" style not needed: "unknown"
const char* error_code_name(ErrorCode code);  // "wrongLength", ...

}  // namespace pshard::protocol
