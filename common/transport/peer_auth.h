// Who may send a job's sockets anything: peers authenticate in the ZeroMQ handshake, before libzmq reads or
// queues a single message of theirs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <zmq.hpp>

#include "common/transport/curve.h"

namespace pshard::transport {

// How long a connection may take to finish its handshake before the binding side drops it (ZMQ_HANDSHAKE_IVL).
// A handshake on a LAN takes milliseconds; this bounds how long a peer that never finishes one holds its
// connection and the one frame it may have started.
constexpr std::chrono::milliseconds kHandshakeTimeout{10000};

// The PLAIN user name of a job's processes; the job token is the password.
constexpr const char* kPlainUser = "pshard";

// The mechanism a job's sockets speak:
//   - security.curve on (keys given): CURVE; the binding side accepts only the job's client key;
//   - else a job token: PLAIN with the token as password; the binding side accepts only the job's token;
//   - else (no token, no keys: a process started by hand without PSHARD_JOB_TOKEN): NULL, anyone may connect.
// Why authenticate in the handshake and not only by the header's token: libzmq queues the frames of a message
// until its last one arrives, so a peer that sends frame after frame marked "more to come" makes the receiver
// hold all of them before any code of ours sees the message. Until a peer's handshake has passed, libzmq reads
// nothing from it but the handshake itself (at most one frame, under the socket's ZMQ_MAXMSGSIZE, for at most
// kHandshakeTimeout; HandshakeGuard closes it once more than a handshake's bytes arrived). PLAIN sends the token in
// clear, as the headers of a plaintext job already do.
enum class Mechanism { kNull, kPlain, kCurve };
Mechanism job_mechanism(const CurveKeys& keys, const std::string& job_token);
const char* mechanism_name(Mechanism m);  // "NULL", "PLAIN", "CURVE"

// Equal bytes, in time that does not depend on where they first differ: how a job token or key is compared.
bool same_secret(const void* a, size_t a_size, const void* b, size_t b_size);
inline bool same_secret(const std::string& a, const std::string& b) {
  return same_secret(a.data(), a.size(), b.data(), b.size());
}

// Makes a connecting socket authenticate as a process of the job. Call before connect(). Throws pshard::Error
// for a token PLAIN cannot carry (over 255 bytes).
void apply_client_auth(zmq::socket_t& socket, const CurveKeys& keys, const std::string& job_token);

// Makes a binding socket authenticate its clients as the job's: a ZAP handler on its own thread (bound to
// inproc://zeromq.zap.01 of `ctx`, so at most one per context) accepts only the job's client key (CURVE) or
// token (PLAIN), and a socket monitor logs handshakes that fail (a peer speaking another mechanism, a wrong
// server key). Refusals are logged as "<who>: refused ..." (per peer address and kind: the first at once, then a
// count per 10 s; transport::RefusalLog). A connection that sends more than a handshake needs before it passed, or
// one too many in their handshake at once, is closed (HandshakeGuard). Also sets the handshake timeout
// (kHandshakeTimeout).
// Construct before bind() on the thread that owns `socket`; destroy before `ctx`. With the NULL mechanism it only
// sets the handshake timeout.
//
//   zmq::socket_t router(ctx, zmq::socket_type::router);
//   PeerAuthenticator auth(ctx, router, keys, job_token, "server 0");
//   router.bind("tcp://*:47011");
class PeerAuthenticator {
 public:
  PeerAuthenticator(zmq::context_t& ctx, zmq::socket_t& socket, const CurveKeys& keys, const std::string& job_token,
                    std::string who);
  ~PeerAuthenticator();  // stops and joins the handler thread
  PeerAuthenticator(const PeerAuthenticator&) = delete;
  PeerAuthenticator& operator=(const PeerAuthenticator&) = delete;

  Mechanism mechanism() const { return mechanism_; }
  uint64_t accepted() const;           // handshakes with the job's key or token
  uint64_t refused() const;            // handshakes with another key or token (ZAP status 400)
  uint64_t failed_handshakes() const;  // handshakes that failed before ZAP (another mechanism, wrong server key)
  uint64_t closed_handshakes() const;  // connections closed in their handshake for its size (HandshakeGuard)

 private:
  struct Impl;
  Mechanism mechanism_;
  std::unique_ptr<Impl> impl_;  // null with the NULL mechanism
};

// Watches a connecting socket's handshakes (a socket monitor) so that a process refused by the job's coordinator
// or server can say why instead of waiting for a reply that never comes. Construct before connect(), on the
// thread that owns `socket`; poll fd()/socket() with the socket's own poll loop or call refusal() now and then.
//
//   HandshakeWatch watch(ctx, sock);
//   sock.connect(endpoint);
//   ...
//   if (std::string why = watch.refusal(); !why.empty()) throw Error("coordinator " + endpoint + " " + why);
class HandshakeWatch {
 public:
  HandshakeWatch(zmq::context_t& ctx, zmq::socket_t& socket, Mechanism mechanism);
  ~HandshakeWatch();
  HandshakeWatch(const HandshakeWatch&) = delete;
  HandshakeWatch& operator=(const HandshakeWatch&) = delete;

  // Reads the monitor's events without blocking; "" while no handshake failed, else why the peer refused this
  // process (e.g. "refused this process's job token (PSHARD_JOB_TOKEN): it belongs to another job").
  std::string refusal();

 private:
  static constexpr int kBrokenHandshakesToRefusal = 3;
  Mechanism mechanism_;
  zmq::socket_t monitor_;
  std::string refusal_;
  int broken_handshakes_ = 0;  // handshakes the peer closed without saying why
};

}  // namespace pshard::transport
