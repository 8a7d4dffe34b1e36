// A KvServer fed malformed messages through a raw DEALER socket answers each with an error and keeps its weights.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <thread>
#include <zmq.hpp>

#include "common/keys/slice_layout.h"
#include "common/protocol/codec.h"
#include "common/transport/bounds.h"
#include "common/transport/frames.h"
#include "common/transport/peer_auth.h"
#include "server/kv/kv_server.h"

namespace pshard {
namespace {

using protocol::ErrorCode;
using protocol::MessageType;

class KvBadInput : public ::testing::Test {
 protected:
  // 16 floats per slice; "w" has 40 elements -> slices of 16, 16, 8 spread over 2 servers.
  SliceLayout layout{{{"w", 40}, {"b", 5}}, 64, 2};
  std::unique_ptr<KvServer> server;
  zmq::context_t ctx;
  zmq::socket_t sock{ctx, zmq::socket_type::dealer};
  uint64_t next_id = 1;

  void SetUp() override {
    KvServerOptions o;
    o.rank = 0;
    o.num_servers = 2;
    o.num_workers = 1;
    o.job_token = "secret";
    o.slice_bytes = 64;
    o.optimizer = optim::make_optimizer(optim::OptimizerParams{});  // sgd
    o.lr_at = [](int64_t) { return 1.0f; };
    server = std::make_unique<KvServer>(o);
    sock.set(zmq::sockopt::rcvtimeo, 5000);
    sock.set(zmq::sockopt::linger, 0);
    transport::apply_client_auth(sock, {}, "secret");
    sock.connect(server->endpoint());
  }

  std::vector<uint32_t> own() const {
    std::vector<uint32_t> ids;
    for (uint32_t i = 0; i < layout.slices().size(); ++i) {
      if (layout.slice(i).server == 0) ids.push_back(i);
    }
    return ids;
  }
  uint32_t foreign() const {
    for (uint32_t i = 0; i < layout.slices().size(); ++i) {
      if (layout.slice(i).server == 1) return i;
    }
    return 0;
  }

  protocol::Message request(MessageType type, const std::vector<uint32_t>& ids, int64_t step = 0) {
    protocol::Message m;
    m.type = type;
    m.request_id = next_id++;
    m.job_token = "secret";
    m.sender_role = protocol::Role::WORKER;
    m.sender_rank = 0;
    m.step = step;
    m.layout_fingerprint = layout.fingerprint();
    for (uint32_t id : ids) {
      const SliceInfo& s = layout.slice(id);
      m.keys.push_back({s.tensor, s.slice, s.offset, s.length, protocol::DType::FLOAT32});
    }
    if (type == MessageType::INIT) {
      for (const TensorSpec& t : layout.tensors()) m.tensors.push_back({t.name, t.numel});
      m.slice_bytes = 64;
      m.num_servers = 2;
    }
    return m;
  }

  void send_raw(const std::string& header, const std::vector<std::vector<float>>& payloads) {
    std::vector<zmq::message_t> frames;
    frames.push_back(transport::copy_frame(header));
    for (const auto& p : payloads) frames.emplace_back(p.data(), p.size() * sizeof(float));
    transport::send_frames(sock, frames);
  }

  protocol::Message receive(std::vector<std::vector<float>>* payloads = nullptr) {
    std::vector<zmq::message_t> frames;
    zmq::message_t f;
    if (!sock.recv(f)) throw std::runtime_error("no reply within 5 s");
    bool more = f.more();
    frames.push_back(std::move(f));
    while (more) {
      zmq::message_t part;
      (void)sock.recv(part);
      more = part.more();
      frames.push_back(std::move(part));
    }
    auto v = transport::views(frames, 0);
    protocol::Decoded d = protocol::decode(v.data(), v.size());
    if (!d.ok) throw std::runtime_error("bad reply: " + d.error);
    if (payloads) {
      payloads->clear();
      for (size_t i = 1; i < frames.size(); ++i) {
        payloads->emplace_back(frames[i].size() / sizeof(float));
        std::memcpy(payloads->back().data(), frames[i].data(), frames[i].size());
      }
    }
    return d.message;
  }

  std::vector<std::vector<float>> values(const std::vector<uint32_t>& ids, float base) {
    std::vector<std::vector<float>> out;
    for (uint32_t id : ids) {
      out.emplace_back(layout.slice(id).length);
      for (size_t i = 0; i < out.back().size(); ++i) out.back()[i] = base + static_cast<float>(id * 100 + i);
    }
    return out;
  }

  std::vector<std::vector<float>> pull_all() {
    send_raw(protocol::encode_header(request(MessageType::PULL, own())), {});
    std::vector<std::vector<float>> w;
    protocol::Message r = receive(&w);
    EXPECT_EQ(r.type, MessageType::WEIGHTS) << r.error_message;
    return w;
  }

  void expect_error(ErrorCode code, const std::string& what) {
    protocol::Message r = receive();
    EXPECT_EQ(r.type, MessageType::ERROR) << what;
    EXPECT_EQ(r.error_code, code) << what << ": got " << protocol::error_code_name(r.error_code) << ": "
                                  << r.error_message;
    EXPECT_FALSE(r.error_message.empty()) << what;
  }
};

TEST_F(KvBadInput, EveryMalformedRequestGetsAnErrorAndNoWeightChanges) {
  send_raw(protocol::encode_header(request(MessageType::INIT, own())), values(own(), 1.0f));
  ASSERT_EQ(receive().type, MessageType::ACK);
  const auto before = pull_all();
  ASSERT_EQ(before, values(own(), 1.0f));
  const auto grads = values(own(), 0.5f);

  {  // unknown type
    protocol::Message m = request(MessageType::PUSH, own());
    m.type = static_cast<MessageType>(77);
    send_raw(protocol::encode_header(m), grads);
    expect_error(ErrorCode::UNKNOWN_TYPE, "unknown type");
  }
  {  // a reply type sent as a request
    send_raw(protocol::encode_header(request(MessageType::WEIGHTS, own())), grads);
    expect_error(ErrorCode::UNKNOWN_TYPE, "reply as request");
  }
  {  // unknown key
    protocol::Message m = request(MessageType::PUSH, own());
    m.keys[0].tensor = 9;
    send_raw(protocol::encode_header(m), grads);
    expect_error(ErrorCode::UNKNOWN_KEY, "unknown key");
  }
  {  // key owned by server 1
    send_raw(protocol::encode_header(request(MessageType::PUSH, {foreign()})), values({foreign()}, 0.5f));
    expect_error(ErrorCode::WRONG_SERVER, "foreign key");
  }
  {  // payload of the wrong size
    auto short_grads = grads;
    short_grads[0].pop_back();
    send_raw(protocol::encode_header(request(MessageType::PUSH, own())), short_grads);
    expect_error(ErrorCode::WRONG_LENGTH, "short payload");
  }
  {  // key length that is not the slice's (payload consistent with the key)
    protocol::Message m = request(MessageType::PUSH, {own()[0]});
    m.keys[0].length -= 1;
    auto g = values({own()[0]}, 0.5f);
    g[0].pop_back();
    send_raw(protocol::encode_header(m), g);
    expect_error(ErrorCode::WRONG_LENGTH, "key length");
  }
  {  // one payload frame missing
    auto fewer = grads;
    fewer.pop_back();
    send_raw(protocol::encode_header(request(MessageType::PUSH, own())), fewer);
    expect_error(ErrorCode::WRONG_PAYLOAD_COUNT, "missing payload");
  }
  {  // a pull with a payload
    send_raw(protocol::encode_header(request(MessageType::PULL, own())), grads);
    expect_error(ErrorCode::WRONG_PAYLOAD_COUNT, "pull with payload");
  }
  {  // truncated header
    std::string h = protocol::encode_header(request(MessageType::PUSH, own()));
    send_raw(h.substr(0, h.size() - 16), grads);
    expect_error(ErrorCode::BAD_HEADER, "truncated header");
    send_raw(h.substr(0, 13), grads);
    expect_error(ErrorCode::BAD_HEADER, "odd-sized header");
    send_raw(std::string(64, '\xff'), {});
    expect_error(ErrorCode::BAD_HEADER, "garbage header");
    send_raw("", {});
    expect_error(ErrorCode::BAD_HEADER, "empty header");
  }
  {  // bad token
    protocol::Message m = request(MessageType::PUSH, own());
    m.job_token = "another-job";
    send_raw(protocol::encode_header(m), grads);
    expect_error(ErrorCode::BAD_TOKEN, "bad token");
  }
  {  // wrong layout fingerprint
    protocol::Message m = request(MessageType::PUSH, own());
    m.layout_fingerprint += 1;
    send_raw(protocol::encode_header(m), grads);
    expect_error(ErrorCode::LAYOUT_MISMATCH, "fingerprint");
  }
  {  // a worker rank outside the job
    protocol::Message m = request(MessageType::PUSH, own());
    m.sender_rank = 5;
    send_raw(protocol::encode_header(m), grads);
    expect_error(ErrorCode::BAD_SENDER, "rank");
  }
  {  // BSP: a push of a future step, and a second init
    send_raw(protocol::encode_header(request(MessageType::PUSH, own(), 3)), grads);
    expect_error(ErrorCode::BAD_STEP, "future step");
    send_raw(protocol::encode_header(request(MessageType::INIT, own())), values(own(), 7.0f));
    expect_error(ErrorCode::ALREADY_INITIALIZED, "second init");
  }

  {  // compressed pushes: a topk index past the slice's end, a bf16 payload of the wrong size, a 1-bit pull
    protocol::Message m = request(MessageType::PUSH, own());
    std::vector<std::vector<float>> sparse;
    for (protocol::KeyRef& k : m.keys) {
      k.encoding = protocol::Encoding::TOPK;
      const uint32_t index = static_cast<uint32_t>(k.length);  // one past the last element
      sparse.push_back({0.0f, 1.0f});
      std::memcpy(&sparse.back()[0], &index, sizeof(index));
    }
    send_raw(protocol::encode_header(m), sparse);
    expect_error(ErrorCode::BAD_ENCODING, "topk index out of range");
    for (protocol::KeyRef& k : m.keys) k.encoding = protocol::Encoding::BF16;
    send_raw(protocol::encode_header(m), grads);  // float32-sized payloads: twice what bf16 takes
    expect_error(ErrorCode::WRONG_LENGTH, "bf16 length");
    protocol::Message pull = request(MessageType::PULL, own());
    pull.pull_encoding = protocol::Encoding::ONEBIT;
    send_raw(protocol::encode_header(pull), {});
    expect_error(ErrorCode::BAD_ENCODING, "1-bit weights");
  }

  EXPECT_EQ(pull_all(), before);  // nothing above changed a weight
  EXPECT_GE(server->stats().errors, 20u);

  {  // and the server still serves: ping, then a good push of step 0 applies (sgd, lr 1)
    send_raw(protocol::encode_header(request(MessageType::PING, {})), {});
    EXPECT_EQ(receive().type, MessageType::PONG);
    send_raw(protocol::encode_header(request(MessageType::PUSH, own(), 0)), grads);
    EXPECT_EQ(receive().type, MessageType::ACK);
    auto after = pull_all();
    ASSERT_EQ(after.size(), before.size());
    for (size_t s = 0; s < after.size(); ++s) {
      for (size_t i = 0; i < after[s].size(); ++i) EXPECT_FLOAT_EQ(after[s][i], before[s][i] - grads[s][i]);
    }
  }
}

TEST_F(KvBadInput, RequestsBeforeTheFirstInitWaitForIt) {
  send_raw(protocol::encode_header(request(MessageType::PULL, own())), {});
  zmq::pollitem_t item{sock.handle(), 0, ZMQ_POLLIN, 0};
  EXPECT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(200)), 0);  // held, not refused
  send_raw(protocol::encode_header(request(MessageType::INIT, own())), values(own(), 2.0f));
  std::vector<std::vector<float>> w;
  protocol::Message first = receive(&w);
  protocol::Message second = receive(w.empty() ? &w : nullptr);
  // The init's ack and the pull's weights arrive in either order.
  const bool weights_first = first.type == MessageType::WEIGHTS;
  EXPECT_EQ(weights_first ? second.type : first.type, MessageType::ACK);
  EXPECT_EQ(weights_first ? first.type : second.type, MessageType::WEIGHTS);
  EXPECT_EQ(w, values(own(), 2.0f));
}

TEST_F(KvBadInput, ShutdownNeedsTheTokenAndIsAcknowledged) {
  protocol::Message m = request(MessageType::SHUTDOWN, {});
  m.job_token = "wrong";
  send_raw(protocol::encode_header(m), {});
  expect_error(ErrorCode::BAD_TOKEN, "shutdown with a bad token");
  EXPECT_FALSE(server->wait_for_shutdown(std::chrono::milliseconds(50)));
  send_raw(protocol::encode_header(request(MessageType::SHUTDOWN, {})), {});
  EXPECT_EQ(receive().type, MessageType::ACK);
  EXPECT_TRUE(server->wait_for_shutdown(std::chrono::seconds(5)));
}

// Watches `socket` for disconnects from its peer; attach before connect() so that no event is missed.
class DisconnectWatch {
 public:
  DisconnectWatch(zmq::context_t& ctx, zmq::socket_t& socket) : mon_(ctx, zmq::socket_type::pair) {
    static int n = 0;
    const std::string ep = "inproc://kv-bad-input-monitor-" + std::to_string(n++);
    ok_ = zmq_socket_monitor(socket.handle(), ep.c_str(), ZMQ_EVENT_DISCONNECTED) == 0;
    mon_.connect(ep);
  }
  // True when a disconnect was seen within `timeout`.
  bool disconnected_within(std::chrono::milliseconds timeout) {
    if (!ok_) return false;
    mon_.set(zmq::sockopt::rcvtimeo, static_cast<int>(timeout.count()));
    zmq::message_t event, address;
    if (!mon_.recv(event)) return false;
    (void)mon_.recv(address);
    uint16_t id = 0;
    std::memcpy(&id, event.data(), sizeof id);
    return id == ZMQ_EVENT_DISCONNECTED;
  }

 private:
  zmq::socket_t mon_;
  bool ok_ = false;
};

TEST_F(KvBadInput, OversizedFrameDisconnectsThePeerAndTheServerGoesOnServing) {
  send_raw(protocol::encode_header(request(MessageType::INIT, own())), values(own(), 1.0f));
  ASSERT_EQ(receive().type, MessageType::ACK);
  const uint64_t requests_before = server->stats().requests;

  // A frame one byte over the data plane's limit (16 MiB at these 64-byte slices).
  zmq::socket_t attacker(ctx, zmq::socket_type::dealer);
  attacker.set(zmq::sockopt::linger, 0);
  attacker.set(zmq::sockopt::reconnect_ivl, 10000);      // stays disconnected while we look
  transport::apply_client_auth(attacker, {}, "secret");  // a job member: the frame limit holds for it too
  DisconnectWatch watch(ctx, attacker);
  attacker.connect(server->endpoint());
  std::string big(static_cast<size_t>(transport::data_max_frame_bytes(64)) + 1, 'x');
  attacker.send(zmq::buffer(big), zmq::send_flags::none);
  EXPECT_TRUE(watch.disconnected_within(std::chrono::milliseconds(5000)))
      << "the server did not disconnect a peer sending a " << big.size() << "-byte frame";

  // Nothing reached the server's request handling, and it still serves the other peer.
  EXPECT_EQ(server->stats().requests, requests_before);
  EXPECT_EQ(pull_all(), values(own(), 1.0f));
  // A frame of exactly the limit is read (and refused as a bad header), not a disconnect.
  big.resize(static_cast<size_t>(transport::data_max_frame_bytes(64)));
  send_raw(big, {});
  expect_error(ErrorCode::BAD_HEADER, "a frame of exactly the limit");
}

TEST_F(KvBadInput, RepliesToAPeerThatDoesNotReadAreDroppedAndCounted) {
  // A peer that floods garbage and never reads its error replies: once its queue (8192 messages, plus what
  // the TCP buffers hold) is full, the server drops further replies instead of holding them.
  zmq::socket_t attacker(ctx, zmq::socket_type::dealer);
  attacker.set(zmq::sockopt::linger, 0);
  attacker.set(zmq::sockopt::rcvhwm, 1);
  attacker.set(zmq::sockopt::rcvbuf, 4096);
  attacker.set(zmq::sockopt::sndhwm, 0);
  transport::apply_client_auth(attacker, {}, "secret");
  attacker.connect(server->endpoint());
  const uint64_t n = 100000;
  const std::string garbage(8, '\xff');
  for (uint64_t i = 0; i < n; ++i) attacker.send(zmq::buffer(garbage), zmq::send_flags::none);
  // Ends as soon as all are in (a second or two in Release); the bound is for a TSan build on a busy machine.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (server->stats().requests < n && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const KvServerStats st = server->stats();
  EXPECT_EQ(st.requests, n);
  EXPECT_EQ(st.errors, n);
  EXPECT_GT(st.replies_dropped, 0u);
  EXPECT_LT(st.replies_dropped, n);
  // The server still answers a peer that reads.
  send_raw(protocol::encode_header(request(MessageType::PING, {})), {});
  EXPECT_EQ(receive().type, MessageType::PONG);
}

// A NaN or an infinity in a pushed gradient, float32 or decoded from a codec, is refused with an error that names
// the worker, the tensor's slice, the step and the element; the weights stay as they were.
TEST_F(KvBadInput, NonFiniteGradientsAreRefusedNamingTheWorkerAndTheTensor) {
  send_raw(protocol::encode_header(request(MessageType::INIT, own())), values(own(), 1.0f));
  ASSERT_EQ(receive().type, MessageType::ACK);
  const auto before = pull_all();
  const uint32_t slice = own()[0];
  auto grads = values({slice}, 0.5f);
  grads[0][3] = std::numeric_limits<float>::quiet_NaN();
  send_raw(protocol::encode_header(request(MessageType::PUSH, {slice}, 0)), grads);
  protocol::Message r = receive();
  ASSERT_EQ(r.type, MessageType::ERROR);
  EXPECT_EQ(r.error_code, ErrorCode::NON_FINITE_GRADIENT) << protocol::error_code_name(r.error_code);
  const std::string& why = r.error_message;
  EXPECT_NE(why.find("worker 0 pushed a non-finite gradient for " + layout.describe(slice) + " at step 0"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("element 3 is nan"), std::string::npos) << why;

  // bf16: an infinity (0xff80: -inf) in the slice's last element.
  protocol::Message m = request(MessageType::PUSH, {slice}, 0);
  m.keys[0].encoding = protocol::Encoding::BF16;
  std::vector<uint16_t> halves(m.keys[0].length, 0x3f00);  // 0.5
  halves.back() = 0xff80;
  std::vector<std::vector<float>> coded(1, std::vector<float>(halves.size() / 2));
  std::memcpy(coded[0].data(), halves.data(), halves.size() * sizeof(uint16_t));
  send_raw(protocol::encode_header(m), coded);
  r = receive();
  ASSERT_EQ(r.type, MessageType::ERROR);
  EXPECT_EQ(r.error_code, ErrorCode::NON_FINITE_GRADIENT) << protocol::error_code_name(r.error_code);
  EXPECT_NE(r.error_message.find("element " + std::to_string(halves.size() - 1) + " is -inf"), std::string::npos)
      << r.error_message;
  EXPECT_EQ(pull_all(), before);  // neither push counted

  // A finite push of the same step is still taken (sgd, lr 1).
  send_raw(protocol::encode_header(request(MessageType::PUSH, {slice}, 0)), values({slice}, 0.5f));
  EXPECT_EQ(receive().type, MessageType::ACK);
  send_raw(protocol::encode_header(request(MessageType::PULL, {slice}, 1)), {});
  std::vector<std::vector<float>> after;
  ASSERT_EQ(receive(&after).type, MessageType::WEIGHTS);
  EXPECT_FLOAT_EQ(after[0][3], before[0][3] - values({slice}, 0.5f)[0][3]);
}

}  // namespace
}  // namespace pshard
