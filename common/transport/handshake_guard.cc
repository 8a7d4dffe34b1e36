// Connections in their ZeroMQ handshake held to what a handshake needs (see handshake_guard.h).
#include "common/transport/handshake_guard.h"

#include <arpa/inet.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

namespace pshard::transport {
namespace {

// ZMTP 3.x: the greeting is 64 bytes; WELCOME is the binding side's only command before it has the credentials
// (PLAIN: "\x07WELCOME" in a 2-byte frame head; CURVE: that, a 16-byte nonce and a 144-byte box).
constexpr uint64_t kGreetingBytes = 64;
constexpr uint64_t kPlainWelcomeBytes = 2 + 8;
constexpr uint64_t kCurveWelcomeBytes = 2 + 8 + 16 + 144;

// The kernel's counters of a TCP connection: bytes acknowledged by the peer and bytes received from it. False when
// `fd` is not a TCP socket or the kernel does not count them (before Linux 4.1).
bool tcp_counters(int fd, uint64_t& acked, uint64_t& received) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  if (len < offsetof(tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received) return false;
  acked = info.tcpi_bytes_acked;
  received = info.tcpi_bytes_received;
  return true;
}

// "127.0.0.1" of a peer address.
std::string address_text(const sockaddr_storage& a) {
  char buf[INET6_ADDRSTRLEN] = "unknown address";
  if (a.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, buf, sizeof buf);
  } else if (a.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, buf, sizeof buf);
  }
  return buf;
}

}  // namespace

HandshakeGuard::HandshakeGuard(Mechanism mechanism, RefusalLog& refusals)
    : sent_before_auth_(kGreetingBytes + (mechanism == Mechanism::kCurve ? kCurveWelcomeBytes : kPlainWelcomeBytes)),
      refusals_(refusals) {}

void HandshakeGuard::accepted(int fd) {
  Connection c;
  c.local_len = sizeof c.local;
  c.peer_len = sizeof c.peer;
  uint64_t acked = 0, received = 0;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&c.local), &c.local_len) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&c.peer), &c.peer_len) != 0 ||
      (c.peer.ss_family != AF_INET && c.peer.ss_family != AF_INET6) || !tcp_counters(fd, acked, received)) {
    pending_.erase(fd);  // gone already, or not TCP
    return;
  }
  c.order = next_order_++;
  pending_[fd] = c;
}

void HandshakeGuard::disconnected(int fd) { pending_.erase(fd); }

bool HandshakeGuard::same_connection(int fd, const Connection& c) {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof local, peer_len = sizeof peer;
  return ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0 &&
         ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0 && local_len == c.local_len &&
         peer_len == c.peer_len && std::memcmp(&local, &c.local, local_len) == 0 &&
         std::memcmp(&peer, &c.peer, peer_len) == 0;
}

void HandshakeGuard::shut(int fd, const Connection& c, const std::string& kind, const std::string& why) {
  ::shutdown(fd, SHUT_RDWR);  // libzmq sees the connection end, closes it and reports DISCONNECTED
  ++closed_;
  const std::string from = address_text(c.peer);
  refusals_.add(from, kind, "closed a connection from " + from + " in its handshake: " + why);
}

bool HandshakeGuard::check() {
  std::vector<std::pair<uint64_t, int>> still;  // (accept order, fd) of the connections still in their handshake
  for (auto it = pending_.begin(); it != pending_.end();) {
    const int fd = it->first;
    uint64_t acked = 0, received = 0;
    if (!same_connection(fd, it->second) || !tcp_counters(fd, acked, received) || acked > sent_before_auth_) {
      it = pending_.erase(it);  // closed (maybe reused), or through its handshake
      continue;
    }
    if (received > kMaxHandshakeBytes) {
      shut(fd, it->second, "handshake bytes",
           std::to_string(received) + " bytes arrived before it was authenticated (a handshake needs under 1 KiB)");
      it = pending_.erase(it);
      continue;
    }
    still.emplace_back(it->second.order, fd);
    ++it;
  }
  if (still.size() > kMaxPending) {  // the oldest go: a job's own peers pass their handshakes in milliseconds
    std::sort(still.begin(), still.end());
    for (size_t i = 0; i + kMaxPending < still.size(); ++i) {
      auto it = pending_.find(still[i].second);
      shut(it->first, it->second, "handshakes",
           "more than " + std::to_string(kMaxPending) + " connections were in their handshake at once (the oldest " +
               "are closed first)");
      pending_.erase(it);
    }
  }
  return !pending_.empty();
}

}  // namespace pshard::transport
