// A handshake that never finishes (see raw_handshake.h).
#include "tests/support/raw_handshake.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

namespace pshard::testing {

double stalled_handshake(const std::string& endpoint, size_t frame_bytes, size_t body_bytes, double wait_s,
                         const std::function<void()>& connected, const std::function<bool()>& hold) {
  using Clock = std::chrono::steady_clock;
  const int port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // A connect that fails (a target busy with a flood of other connections, a signal) is tried again for up to 10 s:
  // a peer that never connected tests nothing.
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  int fd = -1;
  auto start = Clock::now();
  while (fd < 0 && Clock::now() < give_up) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    start = Clock::now();
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      fd = -1;
    }
    if (fd < 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (connected) connected();
  if (fd < 0) return -1;
  std::string greeting(64, '\0');  // signature, version 3.0, mechanism "PLAIN", as-server 0, filler
  greeting[0] = '\xff';
  greeting[9] = '\x7f';
  greeting[10] = 3;
  std::memcpy(&greeting[12], "PLAIN", 5);
  std::string head(9, '\0');  // a long command frame: flags 0x06, then the 8-byte big-endian size
  head[0] = '\x06';
  for (int i = 0; i < 8; ++i) head[1 + i] = static_cast<char>((uint64_t(frame_bytes) >> (8 * (7 - i))) & 0xff);
  const std::string start_bytes = greeting + head;
  const std::string chunk(64 << 10, 'h');  // the body, sent chunk by chunk (the peer holds no copy of it)
  const size_t total = start_bytes.size() + std::min(body_bytes, frame_bytes - 1);
  // Non-blocking: a target that shut the connection down may leave a blocking send() waiting forever on a closed
  // window; its FIN (recv() of 0) or a reset is what counts.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  bool closed = false;
  size_t sent = 0;
  char buf[256];
  auto window = start;  // wait_s counts from here: the connect, or the end of the hold
  while (!closed && Clock::now() - window < std::chrono::duration<double>(wait_s)) {
    if (hold && Clock::now() - start < std::chrono::minutes(1) && hold()) window = Clock::now();
    pollfd p{fd, static_cast<short>(POLLIN | (sent < total ? POLLOUT : 0)), 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);  // the target's greeting, then EOF
      if (n == 0 || (n < 0 && errno != EAGAIN)) closed = true;
    }
    if (!closed && (p.revents & POLLOUT)) {
      const char* from = sent < start_bytes.size() ? start_bytes.data() + sent : chunk.data();
      const size_t n_max = sent < start_bytes.size() ? start_bytes.size() - sent : std::min(chunk.size(), total - sent);
      const ssize_t n = ::send(fd, from, n_max, MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN) closed = true;
    }
  }
  ::close(fd);
  return closed ? std::chrono::duration<double>(Clock::now() - start).count() : -1;
}

}  // namespace pshard::testing
