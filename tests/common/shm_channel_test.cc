// The shared-memory channel's server: requests answered as they arrive, whatever the clients before them do; another
// user's connections refused.
#include "common/transport/shm_channel.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

namespace pshard::transport {
namespace {

using Clock = std::chrono::steady_clock;

std::string address() { return "@pshard-shm-channel-test-" + std::to_string(::getpid()); }

// A client that connects and then sends nothing (a stuck process of this user).
int silent_client(const std::string& addr) {
  const int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, addr.data() + 1, addr.size() - 1);
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + addr.size());
  EXPECT_EQ(::connect(sock, reinterpret_cast<sockaddr*>(&a), len), 0) << std::strerror(errno);
  return sock;
}

// Whether the server closed `sock` (a read sees end of file) within `limit`.
bool closed_within(int sock, std::chrono::milliseconds limit) {
  timeval tv{static_cast<time_t>(limit.count() / 1000), static_cast<suseconds_t>(limit.count() % 1000 * 1000)};
  ::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  return ::recv(sock, &c, 1, 0) == 0;
}

TEST(ShmChannel, SilentClientsDelayNoOtherRequest) {
  std::atomic<int> served{0};
  ShmChannelServer server(address(), "test channel", [&](const std::string& request, int fd, int*, pid_t) {
    if (fd >= 0) ::close(fd);
    ++served;
    return "echo " + request;
  });
  std::vector<int> silent;
  for (int i = 0; i < 20; ++i) silent.push_back(silent_client(address()));
  // Served one connection at a time, each silent client would hold the next request for 2 s: 40 s in all.
  const auto t0 = Clock::now();
  std::string reply, error;
  int reply_fd = -1;
  ASSERT_TRUE(shm_channel_call(address(), "hello", -1, &reply, &reply_fd, std::chrono::milliseconds(5000), &error))
      << error;
  EXPECT_EQ(reply, "echo hello");
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ(served.load(), 1);
  // The silent ones are dropped at their 2 s deadline.
  for (int sock : silent) {
    EXPECT_TRUE(closed_within(sock, std::chrono::milliseconds(5000)));
    ::close(sock);
  }
}

TEST(ShmChannel, AnotherUsersRequestIsRefusedAndOthersGoOn) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as another user";
  std::atomic<int> served{0};
  ShmChannelServer server(address(), "test channel", [&](const std::string&, int fd, int*, pid_t) {
    if (fd >= 0) ::close(fd);
    ++served;
    return std::string("ok");
  });
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // another user, 200 requests: none answered
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    int answered = 0;
    for (int i = 0; i < 200; ++i) {
      std::string reply, error;
      int fd = -1;
      answered += shm_channel_call(address(), "x", -1, &reply, &fd, std::chrono::milliseconds(2000), &error);
    }
    ::_exit(answered == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(served.load(), 0);
  std::string reply, error;
  int reply_fd = -1;
  ASSERT_TRUE(shm_channel_call(address(), "mine", -1, &reply, &reply_fd, std::chrono::milliseconds(5000), &error))
      << error;
  EXPECT_EQ(reply, "ok");
}

}  // namespace
}  // namespace pshard::transport
