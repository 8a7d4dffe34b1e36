// libFuzzer target: what a KV server runs on a received data-plane message before it touches weights.
//
// Input: byte 0 = flags (bit 0: header frame at an odd address, bit 1: the server already has a
// layout, bit 2: server rank 1 instead of 0, bit 3: the server already has its embedding table), then frames as
// [u16 little-endian length][bytes], at most 64 frames; frame 0 is the header. The server's job: token "tok", 2
// workers, 2 servers, slice_bytes 64 (16 floats per slice); its prepared layout is {w: 40, b: 8} floats, its prepared
// table "t" of 64 rows x 4.
// Every input must end in an accepted request whose keys are safe to apply (float32 payloads of the
// slice's size, or valid encodings that decode within the slice), or in an error code with a
// message (what the server sends back); anything else is a crash. Row requests (tableInit, rowPull, rowPush) run
// through the server's own TableStore: each ends answered (a pull with exactly its rows' bytes) or refused with a
// message, and a refused one changes no row.
#include <memory>
#include <vector>

#include "common/compression/codec.h"
#include "common/error.h"
#include "common/keys/slice_layout.h"
#include "common/protocol/codec.h"
#include "common/protocol/request_check.h"
#include "server/tables/table_store.h"
#include "tests/fuzz/fuzz_util.h"

using namespace pshard;
using namespace pshard::protocol;

namespace {

constexpr uint64_t kSliceBytes = 64;
constexpr uint32_t kServers = 2;
constexpr size_t kMaxFrames = 64;

const SliceLayout& prepared_layout() {
  static const SliceLayout layout({{"w", 40}, {"b", 8}}, kSliceBytes, kServers);
  return layout;
}

// The error reply the server would send: it must encode, and decode back to the same text.
void check_error_reply(uint64_t request_id, ErrorCode code, const std::string& why) {
  PSHARD_FUZZ_REQUIRE(code != ErrorCode::NONE);
  PSHARD_FUZZ_REQUIRE(!why.empty());
  Message r;
  r.type = MessageType::ERROR;
  r.request_id = request_id;
  r.sender_role = Role::SERVER;
  r.error_code = code;
  r.error_message = why;
  std::string bytes = encode_header(r);
  std::vector<capnp::word> words(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.data(), bytes.data(), bytes.size());
  FrameView f{words.data(), bytes.size()};
  Decoded back = decode(&f, 1);
  PSHARD_FUZZ_REQUIRE(back.ok);
  PSHARD_FUZZ_REQUIRE(back.message.error_message == why);
  PSHARD_FUZZ_REQUIRE(back.message.request_id == request_id);
}

// SliceStore::install (server/kv/slice_store.cc): the first init from worker 0 with the right token builds the layout.
std::unique_ptr<SliceLayout> layout_from_init(const Message& m, ErrorCode* code, std::string* why) {
  if (m.slice_bytes != kSliceBytes || m.num_servers != kServers) {
    *code = ErrorCode::LAYOUT_MISMATCH;
    *why = "init assumes another slice_bytes or server count";
    return nullptr;
  }
  std::vector<TensorSpec> specs;
  for (const auto& t : m.tensors) specs.push_back({t.name, t.numel});
  std::unique_ptr<SliceLayout> l;
  try {
    l = std::make_unique<SliceLayout>(std::move(specs), m.slice_bytes, m.num_servers);
  } catch (const Error& e) {
    *code = ErrorCode::BAD_HEADER;
    *why = std::string("init tensor list: ") + e.what();
    return nullptr;
  }
  if (l->fingerprint() != m.layout_fingerprint) {
    *code = ErrorCode::LAYOUT_MISMATCH;
    *why = "fingerprint mismatch";
    return nullptr;
  }
  return l;
}

// The server's table store (server/kv/kv_server.cc handle_rows): a tableInit declares, a rowPull or rowPush runs. Rows
// in shared memory are refused, as by a server that shares no memory with the sender (this one has no row segment).
void run_rows(const Message& m, uint8_t flags, const std::vector<FrameView>& frames) {
  if (m.shared_memory) {
    check_error_reply(m.request_id, ErrorCode::BAD_HEADER,
                      "this server shares no memory with its workers (cluster.transport = tcp, or its channel failed)");
    return;
  }
  optim::OptimizerParams p;
  p.name = "adagrad";
  TableStore tables(TableStoreOptions{static_cast<uint32_t>((flags >> 2) & 1), kServers, 2, Consistency::kBsp,
                                      optim::make_optimizer(p), 0.1f, 32, uint64_t(16) << 20});
  ErrorCode code = ErrorCode::NONE;
  std::string why;
  if (flags & 8) {
    Message declare;
    declare.tables.push_back({"t", 64, 4, protocol::TableInit::NORMAL, 0.5f});
    PSHARD_FUZZ_REQUIRE(tables.declare(declare, code, why));
  }
  if (m.type == MessageType::TABLE_INIT) {
    if (!tables.declare(m, code, why)) check_error_reply(m.request_id, code, why);
    return;
  }
  auto req = std::make_shared<Request>();
  req->msg = m;
  req->msg.payloads.clear();
  for (size_t i = 1; i < frames.size(); ++i) {
    req->payloads.push_back(std::make_shared<zmq::message_t>(frames[i].data, frames[i].size));
  }
  std::vector<float> before;
  if (tables.declared()) before = tables.shard(0).values_as_floats();
  for (const RequestPtr& r : tables.run(req)) {
    if (r->error != ErrorCode::NONE) {
      check_error_reply(r->msg.request_id, r->error, r->error_message);
      if (r == req && tables.declared()) PSHARD_FUZZ_REQUIRE(tables.shard(0).values_as_floats() == before);
      continue;
    }
    if (r->msg.type == MessageType::ROW_PULL) {
      const size_t rows = r->payloads.at(0)->size() / sizeof(uint64_t);
      const size_t dim = tables.shard(r->msg.table).spec().dim;
      PSHARD_FUZZ_REQUIRE(r->replies.size() == 1);
      PSHARD_FUZZ_REQUIRE(r->replies[0].size() == rows * dim * row_value_bytes(r->msg.row_encoding));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::FuzzInput in(data, size);
  const uint8_t flags = in.u8();
  // Each frame in its own allocation that ends exactly where the frame ends, so ASan sees any overread.
  std::vector<std::unique_ptr<uint8_t[]>> storage;
  std::vector<FrameView> frames;
  while (in.left() > 0 && frames.size() < kMaxFrames) {
    std::string bytes = in.piece(in.u16());
    const size_t shift = frames.empty() && (flags & 1) ? 1 : 0;
    storage.emplace_back(new uint8_t[bytes.size() + shift]);
    uint8_t* p = storage.back().get() + shift;
    if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
    frames.push_back({p, bytes.size()});
  }

  Decoded d = decode(frames.data(), frames.size());
  if (!d.ok) {
    check_error_reply(d.message.request_id, d.code, d.error);
    return 0;
  }
  const Message& m = d.message;
  PSHARD_FUZZ_REQUIRE(m.payloads.size() == frames.size() - 1);

  ServerView view{"tok", static_cast<uint32_t>((flags >> 2) & 1), 2, nullptr};
  std::unique_ptr<SliceLayout> from_init;
  if (flags & 2) {
    view.layout = &prepared_layout();
  } else if (m.type == MessageType::INIT && m.job_token == view.job_token && m.sender_role == Role::WORKER &&
             m.sender_rank == 0) {
    ErrorCode code = ErrorCode::NONE;
    std::string why;
    from_init = layout_from_init(m, &code, &why);
    if (!from_init) {
      check_error_reply(m.request_id, code, why);
      return 0;
    }
    view.layout = from_init.get();
  }

  RequestCheck c = check_request(m, view);
  if (!c.ok) {
    check_error_reply(m.request_id, c.code, c.error);
    return 0;
  }
  // Accepted ping / shutdown: the server answers pong / ack and touches no weights (any keys are ignored).
  if (m.type == MessageType::PING || m.type == MessageType::SHUTDOWN) return 0;
  if (is_row_message(m.type)) {
    PSHARD_FUZZ_REQUIRE(m.keys.empty());
    run_rows(m, flags, frames);
    return 0;
  }
  // Accepted data request: every key names one slice of this server, once, with its exact extent,
  // and a payload frame (when the type carries one) of exactly that many floats.
  PSHARD_FUZZ_REQUIRE(c.slice_ids.size() == m.keys.size());
  for (size_t i = 0; i < m.keys.size(); ++i) {
    PSHARD_FUZZ_REQUIRE(view.layout != nullptr);
    PSHARD_FUZZ_REQUIRE(c.slice_ids[i] < view.layout->slices().size());
    const SliceInfo& s = view.layout->slice(c.slice_ids[i]);
    PSHARD_FUZZ_REQUIRE(s.server == view.server_rank);
    PSHARD_FUZZ_REQUIRE(m.keys[i].offset == s.offset && m.keys[i].length == s.length);
    if (carries_payloads(m.type) && m.keys[i].encoding == Encoding::NONE) {
      PSHARD_FUZZ_REQUIRE(m.payloads[i].size == s.length * sizeof(float));
    } else if (carries_payloads(m.type)) {
      // A compressed gradient: valid for its slice, and the server's decoding stays inside both buffers.
      PSHARD_FUZZ_REQUIRE(m.type == MessageType::PUSH || m.type == MessageType::PUSH_PULL);
      PSHARD_FUZZ_REQUIRE(
          compression::check_encoded(m.keys[i].encoding, m.payloads[i].data, m.payloads[i].size, s.length).ok());
      std::vector<float> gradient(s.length);
      compression::decode_encoded(m.keys[i].encoding, m.payloads[i].data, m.payloads[i].size, s.length,
                                  gradient.data());
    }
    for (size_t j = 0; j < i; ++j) PSHARD_FUZZ_REQUIRE(c.slice_ids[j] != c.slice_ids[i]);
  }
  return 0;
}
