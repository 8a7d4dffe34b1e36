// The side channel through which a worker and a server on one host exchange their shared-memory segments: an
// abstract Unix socket (no file to clean up; private to the host's network namespace) that carries one request and
// one reply, each a short text with at most one file descriptor (SCM_RIGHTS).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace pshard::transport {

// cluster.transport: how payloads move between a worker and a server on the same host.
enum class PayloadTransport {
  kTcp,   // always frames over ZeroMQ's TCP
  kShm,   // shared memory; a server that is not on this host is an error
  kAuto,  // shared memory where the server is on this host, else TCP
};
// "auto", "tcp" or "shm"; throws pshard::Error naming the value otherwise.
PayloadTransport parse_payload_transport(const std::string& text);

// The channel's address for the server bound at `endpoint` ("tcp://127.0.0.1:41213") of the job with `job_token`:
// "@pshard-shm-<hash of the token>-<port>" ('@' standing for the abstract namespace's leading NUL byte). A worker
// finds it only on the server's host (and network namespace), which is what makes the channel "same host".
std::string shm_channel_address(const std::string& job_token, const std::string& endpoint);

// The server side: a thread that accepts connections from processes of this user only (SO_PEERCRED;
// others are refused and logged) and answers each request with `handler`. Requests are at most 4 KiB; a peer gets
// 2 s to send one. Connections are served as their requests arrive, so a client that connects and stays silent
// delays no other; refusals (another user, no request) are logged rate-limited (RefusalLog). Stops and joins in
// the destructor.
//
//   ShmChannelServer channel(shm_channel_address(token, endpoint), "server 0",
//       [&](const std::string& request, int fd, int* reply_fd, pid_t) { ...; *reply_fd = weights.fd(); return "ok"; });
class ShmChannelServer {
 public:
  // `received_fd` is the descriptor the request carried (-1: none); the handler owns it. It may set `reply_fd`
  // (not given away: the reply carries a duplicate). `peer_pid`: the process that sent the request (SO_PEERCRED).
  using Handler =
      std::function<std::string(const std::string& request, int received_fd, int* reply_fd, pid_t peer_pid)>;
  // Throws pshard::Error naming the address when it cannot listen (another process holds it).
  ShmChannelServer(const std::string& address, std::string who, Handler handler);
  ~ShmChannelServer();
  ShmChannelServer(const ShmChannelServer&) = delete;
  ShmChannelServer& operator=(const ShmChannelServer&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The client side: one exchange with the server at `address`, within `timeout`. Returns false with `error` set when
// no server listens there (another host: the normal case for `cluster.transport = auto`) or the exchange failed;
// true with the reply text and the descriptor it carried (`reply_fd`, -1 when none; the caller owns it).
bool shm_channel_call(const std::string& address, const std::string& request, int fd, std::string* reply, int* reply_fd,
                      std::chrono::milliseconds timeout, std::string* error);

}  // namespace pshard::transport
