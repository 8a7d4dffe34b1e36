// What a connection still in its ZeroMQ handshake may make a binding socket's process hold, and how it is held to
// that: a connection that sends more than a handshake needs before it is authenticated is closed.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "common/transport/peer_auth.h"
#include "common/transport/refusal_log.h"

namespace pshard::transport {

// libzmq reads an unauthenticated peer's first command frame into a buffer of the size the frame announces (up to
// the socket's ZMQ_MAXMSGSIZE: 16 MiB on a server) and offers no hook to refuse it sooner or to cap how many
// connections are in their handshake. The guard watches each accepted connection (the socket monitor's ACCEPTED
// and DISCONNECTED events name its descriptor) through the kernel's TCP counters until its handshake has passed,
// and shuts down one that
//   - has received more than kMaxHandshakeBytes from its peer (a PLAIN or CURVE handshake is under 1 KiB), or
//   - is the oldest of more than kMaxPending connections in their handshake at once (a job's own peers pass theirs
//     within milliseconds, so a flood of connections that never finish cannot keep them out).
// A connection has passed its handshake once the binding side has sent more than it sends before it (the 64-byte
// greeting and the mechanism's WELCOME; READY comes after the credentials were accepted, and a peer's first
// message after READY acknowledges it). Descriptors are matched by their address pair, so a descriptor that libzmq
// closed and reused for another connection is never mistaken for the one it was.
// Not thread-safe: the authenticator's thread owns it. Sockets that are not TCP (ipc://) are not watched.
//
//   guard.accepted(fd);      // ZMQ_EVENT_ACCEPTED
//   guard.disconnected(fd);  // ZMQ_EVENT_DISCONNECTED
//   bool busy = guard.check();  // now and then: every kCheckInterval while busy
class HandshakeGuard {
 public:
  static constexpr uint64_t kMaxHandshakeBytes = 16 << 10;
  static constexpr size_t kMaxPending = 256;
  static constexpr std::chrono::milliseconds kCheckInterval{2};

  HandshakeGuard(Mechanism mechanism, RefusalLog& refusals);

  void accepted(int fd);
  void disconnected(int fd);
  // Looks at every connection still in its handshake and shuts down those over the limits (logged through the
  // refusal log). True while some connection is still in its handshake.
  bool check();

  size_t pending() const { return pending_.size(); }
  uint64_t closed() const { return closed_; }  // connections shut down by the limits

 private:
  struct Connection {
    sockaddr_storage local{}, peer{};
    socklen_t local_len = 0, peer_len = 0;
    uint64_t order = 0;  // accept order: the oldest are shut down first when too many are pending
  };
  // Whether `fd` is still the connection `c` was (the same address pair).
  static bool same_connection(int fd, const Connection& c);
  void shut(int fd, const Connection& c, const std::string& kind, const std::string& why);

  uint64_t sent_before_auth_;  // what the binding side sends before the handshake passed (greeting + WELCOME)
  RefusalLog& refusals_;
  std::map<int, Connection> pending_;
  uint64_t next_order_ = 0;
  uint64_t closed_ = 0;
};

}  // namespace pshard::transport
