// Handshake authentication of a job's sockets: CURVE or PLAIN clients, a ZAP handler for binding sockets, and a
// monitor that tells a refused client why (see peer_auth.h).
#include "common/transport/peer_auth.h"

#include <zmq.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/transport/frames.h"
#include "common/transport/handshake_guard.h"
#include "common/transport/refusal_log.h"
#include "common/transport/wakeup.h"
#include "common/util/log.h"
#include "common/util/signals.h"

namespace pshard::transport {
namespace {

constexpr size_t kMaxPlainField = 255;  // ZMTP PLAIN: user name and password are at most 255 bytes each

std::string protocol_failure(uint32_t value, const char* mechanism) {
  if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
    return std::string("the peer speaks another ZeroMQ security mechanism than ") + mechanism +
           " (security.curve differs, or one side has no job token)";
  }
  if (value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
    return "the peer's handshake does not decrypt (wrong server key?)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "protocol error 0x%08x", value);
  return buf;
}

std::string handshake_failure(uint16_t event, uint32_t value, const char* mechanism) {
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) return protocol_failure(value, mechanism);
  return "the handshake broke off (" + std::string(zmq_strerror(static_cast<int>(value))) +
         "): a peer without this job's credentials?";
}

// The (event, value) of a monitor message's first frame; false when it is malformed.
bool read_event(const std::vector<zmq::message_t>& ev, uint16_t& event, uint32_t& value) {
  if (ev.size() < 2 || ev[0].size() < 6) return false;
  std::memcpy(&event, ev[0].data(), sizeof event);
  std::memcpy(&value, static_cast<const char*>(ev[0].data()) + 2, sizeof value);
  return true;
}

std::string monitor_endpoint(const void* owner, const char* what) {
  return std::string("inproc://pshard-") + what + "-" + std::to_string(reinterpret_cast<uintptr_t>(owner));
}

}  // namespace

bool same_secret(const void* a, size_t a_size, const void* b, size_t b_size) {
  if (a_size != b_size) return false;
  unsigned char diff = 0;
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  for (size_t i = 0; i < a_size; ++i) diff |= static_cast<unsigned char>(x[i] ^ y[i]);
  return diff == 0;
}

Mechanism job_mechanism(const CurveKeys& keys, const std::string& job_token) {
  if (keys.enabled()) return Mechanism::kCurve;
  return job_token.empty() ? Mechanism::kNull : Mechanism::kPlain;
}

const char* mechanism_name(Mechanism m) {
  switch (m) {
    case Mechanism::kNull: return "NULL";
    case Mechanism::kPlain: return "PLAIN";
    case Mechanism::kCurve: return "CURVE";
  }
  return "?";
}

void apply_client_auth(zmq::socket_t& socket, const CurveKeys& keys, const std::string& job_token) {
  switch (job_mechanism(keys, job_token)) {
    case Mechanism::kNull: return;
    case Mechanism::kCurve: apply_curve_client(socket, keys); return;
    case Mechanism::kPlain:
      if (job_token.size() > kMaxPlainField) {
        throw Error("the job token (PSHARD_JOB_TOKEN) is " + std::to_string(job_token.size()) +
                    " bytes; at most 255 are allowed");
      }
      socket.set(zmq::sockopt::plain_username, kPlainUser);
      socket.set(zmq::sockopt::plain_password, job_token);
      return;
  }
}

struct PeerAuthenticator::Impl {
  std::string who;
  Mechanism mechanism;
  std::array<uint8_t, 32> client_key{};  // CURVE
  std::string token;                     // PLAIN
  zmq::socket_t zap;                     // REP on inproc://zeromq.zap.01
  zmq::socket_t monitor;                 // PAIR receiving the socket's handshake-failure events
  Wakeup wake;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> accepted{0}, refused{0}, failed{0}, closed_handshakes{0};
  RefusalLog refusals;
  HandshakeGuard guard;  // what a connection in its handshake may send (before `thread`, which uses it)
  std::thread thread;

  Impl(zmq::context_t& ctx, zmq::socket_t& socket, Mechanism m, const CurveKeys& keys, const std::string& job_token,
       std::string name)
      : who(std::move(name)),
        mechanism(m),
        token(job_token),
        zap(ctx, zmq::socket_type::rep),
        monitor(ctx, zmq::socket_type::pair),
        refusals(who),
        guard(m, refusals) {
    if (m == Mechanism::kCurve && !decode_curve_key(keys.client_public, client_key)) {
      throw Error(who + ": the job's client public key is not Z85");
    }
    if (m == Mechanism::kPlain && token.size() > kMaxPlainField) {
      throw Error(who + ": the job token (PSHARD_JOB_TOKEN) is " + std::to_string(token.size()) +
                  " bytes; at most 255 are allowed");
    }
    zap.set(zmq::sockopt::linger, 0);
    try {
      zap.bind("inproc://zeromq.zap.01");
    } catch (const zmq::error_t& e) {
      throw Error(who + ": cannot start the ZeroMQ authenticator (inproc://zeromq.zap.01): " + e.what());
    }
    const std::string monitor_ep = monitor_endpoint(this, "auth-monitor");
    if (zmq_socket_monitor(socket.handle(), monitor_ep.c_str(),
                           ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) != 0) {
      throw Error(who + ": cannot monitor the socket's handshakes: " + zmq_strerror(zmq_errno()));
    }
    monitor.set(zmq::sockopt::linger, 0);
    monitor.connect(monitor_ep);
    if (m == Mechanism::kCurve) {
      socket.set(zmq::sockopt::curve_server, 1);
      socket.set(zmq::sockopt::curve_secretkey, keys.server_secret);
    } else {
      socket.set(zmq::sockopt::plain_server, 1);
    }
    socket.set(zmq::sockopt::zap_domain, "pshard");
    thread = start_thread([this] { loop(); });
  }

  ~Impl() {
    stopping = true;
    wake.notify();
    if (thread.joinable()) thread.join();
  }

  // RFC 27 (ZAP): version, request id, domain, address, routing id, mechanism, credentials (CURVE: the client's
  // public key; PLAIN: user name, password).
  bool credentials_ok(const std::vector<zmq::message_t>& req, const std::string& got) const {
    if (got != mechanism_name(mechanism)) return false;
    if (mechanism == Mechanism::kCurve) {
      return req.size() >= 7 && same_secret(req[6].data(), req[6].size(), client_key.data(), client_key.size());
    }
    return req.size() >= 8 && same_secret(req[7].data(), req[7].size(), token.data(), token.size());
  }

  void answer(std::vector<zmq::message_t>& req) {
    auto text = [&](size_t i) { return i < req.size() ? req[i].to_string() : std::string(); };
    const std::string address = text(3), got = text(5);
    const bool ok = credentials_ok(req, got);
    if (ok) {
      ++accepted;
    } else {
      ++refused;
      const std::string from = address.empty() ? std::string("an unknown address") : address;
      const std::string what = mechanism == Mechanism::kCurve
                                   ? "its key is not this job's client key (a process of another job, or one "
                                     "started with another key directory)"
                                   : "its job token is not this job's (a process of another job, or a stale "
                                     "PSHARD_JOB_TOKEN)";
      refusals.add(address.empty() ? std::string("unknown address") : address,
                   mechanism == Mechanism::kCurve ? "key" : "token",
                   "refused a " + (got.empty() ? std::string("ZeroMQ") : got) + " client from " + from + ": " + what);
    }
    std::vector<zmq::message_t> reply;
    reply.push_back(copy_frame("1.0"));
    reply.push_back(copy_frame(text(1)));
    reply.push_back(copy_frame(ok ? "200" : "400"));
    reply.push_back(
        copy_frame(ok ? "OK" : (mechanism == Mechanism::kCurve ? "unknown client key" : "wrong job token")));
    reply.push_back(copy_frame(""));  // user id
    reply.push_back(copy_frame(""));  // metadata
    send_frames(zap, reply);
  }

  void on_monitor_event(std::vector<zmq::message_t>& ev) {
    uint16_t event = 0;
    uint32_t value = 0;
    if (!read_event(ev, event, value)) return;
    if (event == ZMQ_EVENT_ACCEPTED || event == ZMQ_EVENT_DISCONNECTED) {  // the value is the connection's descriptor
      if (event == ZMQ_EVENT_ACCEPTED) {
        guard.accepted(static_cast<int>(value));
      } else {
        guard.disconnected(static_cast<int>(value));
      }
      return;
    }
    ++failed;
    refusals.add(ev[1].to_string(), "handshake " + std::to_string(event) + "/" + std::to_string(value),
                 "refused a connection on " + ev[1].to_string() + ": " +
                     handshake_failure(event, value, mechanism_name(mechanism)));
  }

  void loop() {
    std::vector<zmq::message_t> frames;
    bool handshaking = false;  // some connection is in its handshake: the guard looks again soon
    while (!stopping) {
      zmq::pollitem_t items[] = {
          {zap.handle(), 0, ZMQ_POLLIN, 0}, {monitor.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake.fd(), ZMQ_POLLIN, 0}};
      try {
        zmq::poll(items, 3, handshaking ? HandshakeGuard::kCheckInterval : std::chrono::milliseconds(1000));
        if (items[2].revents & ZMQ_POLLIN) wake.drain();
        while (recv_frames(zap, frames)) answer(frames);
        while (recv_frames(monitor, frames)) on_monitor_event(frames);
        handshaking = guard.check();
        closed_handshakes = guard.closed();
        refusals.flush();
      } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) return;
        PSHARD_LOG(kError) << who << ": ZeroMQ authenticator: " << e.what();
      }
    }
  }
};

PeerAuthenticator::PeerAuthenticator(zmq::context_t& ctx, zmq::socket_t& socket, const CurveKeys& keys,
                                     const std::string& job_token, std::string who)
    : mechanism_(job_mechanism(keys, job_token)) {
  socket.set(zmq::sockopt::handshake_ivl, static_cast<int>(kHandshakeTimeout.count()));
  if (mechanism_ == Mechanism::kNull) return;
  if (mechanism_ == Mechanism::kCurve) require_curve(who);
  impl_ = std::make_unique<Impl>(ctx, socket, mechanism_, keys, job_token, std::move(who));
}

PeerAuthenticator::~PeerAuthenticator() = default;

uint64_t PeerAuthenticator::accepted() const { return impl_ ? impl_->accepted.load() : 0; }
uint64_t PeerAuthenticator::refused() const { return impl_ ? impl_->refused.load() : 0; }
uint64_t PeerAuthenticator::failed_handshakes() const { return impl_ ? impl_->failed.load() : 0; }
uint64_t PeerAuthenticator::closed_handshakes() const { return impl_ ? impl_->closed_handshakes.load() : 0; }

HandshakeWatch::HandshakeWatch(zmq::context_t& ctx, zmq::socket_t& socket, Mechanism mechanism)
    : mechanism_(mechanism), monitor_(ctx, zmq::socket_type::pair) {
  const std::string ep = monitor_endpoint(this, "handshake-watch");
  if (zmq_socket_monitor(socket.handle(), ep.c_str(),
                         ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0) {
    throw Error(std::string("cannot monitor a socket's handshakes: ") + zmq_strerror(zmq_errno()));
  }
  monitor_.set(zmq::sockopt::linger, 0);
  monitor_.connect(ep);
}

HandshakeWatch::~HandshakeWatch() = default;

std::string HandshakeWatch::refusal() {
  std::vector<zmq::message_t> ev;
  while (refusal_.empty() && recv_frames(monitor_, ev)) {
    uint16_t event = 0;
    uint32_t value = 0;
    if (!read_event(ev, event, value)) continue;
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      refusal_ = mechanism_ == Mechanism::kCurve
                     ? "refused this process's CurveZMQ client key (status " + std::to_string(value) +
                           "): it is not the job's (another job's key directory?)"
                     : "refused this process's job token (status " + std::to_string(value) +
                           "): PSHARD_JOB_TOKEN is not this job's (a process of another job, or a stale token?)";
    } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
      refusal_ = "refused the connection: " + protocol_failure(value, mechanism_name(mechanism_));
    } else if (++broken_handshakes_ >= kBrokenHandshakesToRefusal) {
      // The peer closed the connection in the handshake: when it noticed the other mechanism before we did, or
      // dropped us. Once may be the network; every time is a refusal.
      refusal_ = "closed the connection in every handshake (" + std::string(zmq_strerror(static_cast<int>(value))) +
                 "): " + protocol_failure(ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH, mechanism_name(mechanism_)) +
                 ", or it does not accept this process";
    }
  }
  return refusal_;
}

}  // namespace pshard::transport
