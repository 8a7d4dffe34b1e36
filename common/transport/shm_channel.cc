// An abstract Unix socket that exchanges shared-memory segments between the processes of one job on one host (see
// shm_channel.h).
#include "common/transport/shm_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/transport/refusal_log.h"
#include "common/transport/wakeup.h"
#include "common/util/log.h"
#include "common/util/signals.h"

namespace pshard::transport {
namespace {

constexpr size_t kMaxMessage = 4096;
// How long a connected client has to send its request (the clients send it at once).
constexpr std::chrono::milliseconds kRequestTime{2000};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// sockaddr_un of an abstract address ("@name": the '@' becomes the leading NUL byte).
socklen_t abstract_address(const std::string& address, sockaddr_un* a) {
  std::memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  const size_t n = std::min(address.size(), sizeof a->sun_path);
  std::memcpy(a->sun_path, address.data(), n);
  if (n > 0 && a->sun_path[0] == '@') a->sun_path[0] = '\0';
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n);
}

// Sends `text` with `fd` (-1: none) as one message.
bool send_message(int sock, const std::string& text, int fd) {
  iovec io{const_cast<char*>(text.data()), text.size()};
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    std::memset(control, 0, sizeof control);
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  return ::sendmsg(sock, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

// Receives one message within `timeout`: its text and the descriptor it carried (-1: none). False on timeout, EOF
// or error (any descriptor received is closed).
bool recv_message(int sock, std::string* text, int* fd, std::chrono::milliseconds timeout) {
  *fd = -1;
  pollfd p{sock, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
  char buf[kMaxMessage];
  iovec io{buf, sizeof buf};
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int got = -1;
      std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (*fd < 0) {
        *fd = got;
      } else {
        ::close(got);  // one descriptor per message
      }
    }
  }
  if (n <= 0 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
    return false;
  }
  text->assign(buf, static_cast<size_t>(n));
  return true;
}

bool same_user(int sock, uid_t* uid, pid_t* pid) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  *uid = cred.uid;
  *pid = cred.pid;
  return cred.uid == ::geteuid();
}

}  // namespace

PayloadTransport parse_payload_transport(const std::string& text) {
  if (text == "auto") return PayloadTransport::kAuto;
  if (text == "tcp") return PayloadTransport::kTcp;
  if (text == "shm") return PayloadTransport::kShm;
  throw Error("cluster.transport = '" + text + "': use auto, tcp or shm");
}

std::string shm_channel_address(const std::string& job_token, const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  const std::string port = colon == std::string::npos ? endpoint : endpoint.substr(colon + 1);
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a(job_token)));
  return "@pshard-shm-" + std::string(hash) + "-" + port;
}

struct ShmChannelServer::Impl {
  // Connections waiting for their request: served as each one's request arrives, in any order, so that a client that
  // connects and sends nothing delays no other (and is dropped at its deadline). At most kMaxWaiting at a time; a
  // connection beyond that waits in the listen queue.
  static constexpr size_t kMaxWaiting = 64;
  struct Waiting {
    int sock;
    pid_t pid;  // the connecting process (SO_PEERCRED)
    std::chrono::steady_clock::time_point deadline;
  };

  std::string address, who;
  Handler handler;
  int listener = -1;
  Wakeup wake;
  std::atomic<bool> stopping{false};
  std::thread thread;
  std::vector<Waiting> waiting;
  std::unique_ptr<RefusalLog> refusals;  // another user's connections, silent clients: rate-limited lines

  // A new connection: another user's is refused at once (its credentials are known at accept); this user's waits.
  void admit(int sock) {
    uid_t uid = 0;
    pid_t pid = 0;
    if (!same_user(sock, &uid, &pid)) {
      refusals->add("uid " + std::to_string(uid), "otherUser",
                    who + ": refused a shared-memory request from uid " + std::to_string(uid) +
                        ": only processes of this user may share memory with it");
      ::close(sock);
      return;
    }
    waiting.push_back({sock, pid, std::chrono::steady_clock::now() + kRequestTime});
  }

  // A waiting connection whose request has arrived (or that closed): read it, answer, close.
  void serve(int sock, pid_t pid) {
    std::string request;
    int fd = -1;
    if (recv_message(sock, &request, &fd, std::chrono::milliseconds(100))) {
      int reply_fd = -1;
      std::string reply;
      try {
        reply = handler(request, fd, &reply_fd, pid);
      } catch (const std::exception& e) {
        reply = std::string("refused\n") + e.what();
        reply_fd = -1;
      }
      (void)send_message(sock, reply, reply_fd);
    }
    ::close(sock);
  }

  void loop() {
    while (!stopping) {
      std::vector<pollfd> items = {{listener, static_cast<short>(waiting.size() < kMaxWaiting ? POLLIN : 0), 0},
                                   {wake.fd(), POLLIN, 0}};
      auto now = std::chrono::steady_clock::now();
      int timeout_ms = 1000;
      for (const Waiting& w : waiting) {
        items.push_back({w.sock, POLLIN, 0});
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(w.deadline - now).count() + 1;
        timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, timeout_ms));
      }
      const int ready = ::poll(items.data(), items.size(), timeout_ms);
      if (ready < 0) continue;
      if (items[1].revents & POLLIN) wake.drain();
      now = std::chrono::steady_clock::now();
      std::vector<Waiting> still;
      for (size_t i = 0; i < waiting.size(); ++i) {
        const Waiting& w = waiting[i];
        if (items[2 + i].revents != 0) {
          serve(w.sock, w.pid);
        } else if (now >= w.deadline) {
          refusals->add("a local process", "noRequest",
                        who + ": dropped a shared-memory connection that sent no request within " +
                            std::to_string(kRequestTime.count()) + " ms");
          ::close(w.sock);
        } else {
          still.push_back(w);
        }
      }
      waiting.swap(still);
      if (items[0].revents & POLLIN) {
        const int sock = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (sock >= 0) admit(sock);
      }
      refusals->flush();
    }
    for (const Waiting& w : waiting) ::close(w.sock);
    waiting.clear();
  }
};

ShmChannelServer::ShmChannelServer(const std::string& address, std::string who, Handler handler)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.address = address;
  m.who = std::move(who);
  m.handler = std::move(handler);
  m.refusals = std::make_unique<RefusalLog>(m.who);
  m.listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (m.listener < 0) throw Error(m.who + ": cannot open a Unix socket: " + std::strerror(errno));
  sockaddr_un a{};
  const socklen_t len = abstract_address(address, &a);
  if (::bind(m.listener, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(m.listener, 64) != 0) {
    const std::string why = std::strerror(errno);
    ::close(m.listener);
    throw Error(m.who + ": cannot listen on the shared-memory channel " + address + ": " + why);
  }
  m.thread = start_thread([&m] { m.loop(); });
}

ShmChannelServer::~ShmChannelServer() {
  impl_->stopping = true;
  impl_->wake.notify();
  if (impl_->thread.joinable()) impl_->thread.join();
  ::close(impl_->listener);
}

bool shm_channel_call(const std::string& address, const std::string& request, int fd, std::string* reply, int* reply_fd,
                      std::chrono::milliseconds timeout, std::string* error) {
  *reply_fd = -1;
  const int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) {
    *error = std::string("cannot open a Unix socket: ") + std::strerror(errno);
    return false;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{sock};
  sockaddr_un a{};
  const socklen_t len = abstract_address(address, &a);
  if (::connect(sock, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    *error = "no server listens on " + address + " (" + std::strerror(errno) + ")";
    return false;
  }
  uid_t uid = 0;
  pid_t pid = 0;
  if (!same_user(sock, &uid, &pid)) {
    *error = address + " belongs to uid " + std::to_string(uid) + ", not to this user";
    return false;
  }
  if (!send_message(sock, request, fd)) {
    *error = std::string("cannot send to ") + address + ": " + std::strerror(errno);
    return false;
  }
  if (!recv_message(sock, reply, reply_fd, timeout)) {
    *error = "no reply from " + address + " within " + std::to_string(timeout.count()) + " ms";
    return false;
  }
  return true;
}

}  // namespace pshard::transport
