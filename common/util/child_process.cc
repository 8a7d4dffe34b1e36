// posix_spawn + bounded waitpid, /proc/self/exe and free ports (see child_process.h).
#include "common/util/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/error.h"

extern char** environ;

namespace pshard {
namespace {

using Clock = std::chrono::steady_clock;

// Waits up to `seconds` for pid; returns true with *status set when it exited.
bool wait_for(pid_t pid, double seconds, int* status) {
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) throw Error(std::string("waitpid: ") + std::strerror(errno));
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

ChildResult run_child(const std::vector<std::string>& argv, const std::string& log_path, double timeout_s) {
  if (argv.empty()) throw Error("run_child: empty command");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!log_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  }
  pid_t pid = 0;
  auto start = Clock::now();
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw Error("cannot start '" + argv[0] + "'" + (log_path.empty() ? "" : " (log " + log_path + ")") + ": " +
                std::strerror(rc));
  }

  ChildResult result;
  int status = 0;
  if (!wait_for(pid, timeout_s, &status)) {
    result.timed_out = true;
    kill(pid, SIGTERM);
    if (!wait_for(pid, 10.0, &status)) {
      kill(pid, SIGKILL);
      wait_for(pid, 3600.0, &status);
    }
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

std::string self_executable() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw Error(std::string("cannot find the pshard executable (/proc/self/exe): ") + std::strerror(errno));
  return std::string(buf, static_cast<size_t>(n));
}

int pick_free_port(const std::string& host) { return pick_free_ports(1, host).at(0); }

std::vector<int> pick_free_ports(int count, const std::string& host) {
  std::vector<int> fds, ports;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    throw Error("launcher: cannot pick a port on '" + host + "': not an IPv4 address");
  }
  for (int i = 0; i < count; ++i) {  // all sockets stay open until the end, so the ports are distinct
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw Error("launcher: socket() failed: " + std::string(strerror(errno)));
    fds.push_back(fd);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      for (int f : fds) ::close(f);
      throw Error("launcher: cannot bind a free port on " + host + ": " + strerror(errno));
    }
    ports.push_back(ntohs(addr.sin_port));
  }
  for (int f : fds) ::close(f);
  return ports;
}

}  // namespace pshard
