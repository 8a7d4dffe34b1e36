// fork/exec with the child prepared before the fork, bounded waitpid, /proc/self/exe and free ports
// (see child_process.h).
#include "common/util/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
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

// `name` itself when it holds a '/', else the first executable PATH/name (the shell's rule); `name` when none is
// found, so that execve's ENOENT names it.
std::string find_in_path(const std::string& name, const std::string& path) {
  if (name.find('/') != std::string::npos) return name;
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find(':', begin);
    if (end == std::string::npos) end = path.size();
    const std::string dir = end > begin ? path.substr(begin, end - begin) : ".";
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return name;
}

// This process's environment with `overrides` ("KEY=VALUE") set over it, in its order.
std::vector<std::string> merged_environment(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  std::map<std::string, size_t> index;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    index[kv.substr(0, kv.find('='))] = env.size();
    env.push_back(kv);
  }
  for (const std::string& kv : overrides) {
    const std::string key = kv.substr(0, kv.find('='));
    auto it = index.find(key);
    if (it != index.end()) {
      env[it->second] = kv;
    } else {
      index[key] = env.size();
      env.push_back(kv);
    }
  }
  return env;
}

void close_if_open(int fd) {
  if (fd >= 0) ::close(fd);
}

}  // namespace

SpawnedChild spawn_child(const SpawnRequest& request) {
  if (request.argv.empty()) throw Error("cannot start a child: empty command line");
  // Everything the child needs is prepared before fork(): after it, only async-signal-safe calls are allowed (the
  // caller may have threads). A program named without a '/' is looked up in the child's PATH here, for the same
  // reason: execvpe may allocate.
  const std::vector<std::string> env = merged_environment(request.env);
  std::string path;
  for (const std::string& kv : env) {
    if (kv.rfind("PATH=", 0) == 0) path = kv.substr(5);
  }
  const std::string program = find_in_path(request.argv[0], path);
  std::vector<char*> argv, envp;
  for (const std::string& a : request.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, exec_pipe[2] = {-1, -1}, in_pipe[2] = {-1, -1};
  int log_fd = -1, null_fd = -1;
  auto close_all = [&] {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], exec_pipe[0], exec_pipe[1], in_pipe[0],
                   in_pipe[1], log_fd, null_fd})
      close_if_open(fd);
  };
  auto fail = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    close_all();
    throw Error("cannot start " + request.argv[0] + ": " + what + ": " + reason);
  };
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) fail("pipe");
  if (request.output == ChildOutput::kPipes) {
    if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) fail("pipe");
  }
  if (request.output == ChildOutput::kLogFile) {
    log_fd = ::open(request.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) fail("cannot open its log " + request.log_path);
  }
  if (request.stdin == ChildInput::kNull && (null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
    fail("/dev/null");
  }
  if (request.stdin == ChildInput::kPipe && ::pipe2(in_pipe, O_CLOEXEC) != 0) fail("pipe");
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) fail("fork");
  if (pid == 0) {
    if (request.own_process_group) ::setpgid(0, 0);
    if (request.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent ended before prctl took effect
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    if (in_pipe[0] >= 0) ::dup2(in_pipe[0], 0);
    if (out_pipe[1] >= 0) ::dup2(out_pipe[1], 1);
    if (err_pipe[1] >= 0) ::dup2(err_pipe[1], 2);
    if (log_fd >= 0) {
      ::dup2(log_fd, 1);
      ::dup2(log_fd, 2);
    }
    ::execve(program.c_str(), argv.data(), envp.data());
    int e = errno;
    ssize_t ignored = ::write(exec_pipe[1], &e, sizeof e);
    (void)ignored;
    ::_exit(127);
  }
  if (request.own_process_group) ::setpgid(pid, pid);  // also here, so kill(-pid) works before the child ran
  SpawnedChild child;
  child.pid = pid;
  child.stdout_fd = out_pipe[0];
  child.stderr_fd = err_pipe[0];
  child.stdin_fd = in_pipe[1];
  for (int* fd : {&out_pipe[1], &err_pipe[1], &exec_pipe[1], &in_pipe[0], &log_fd, &null_fd}) {
    close_if_open(*fd);
    *fd = -1;
  }
  // The exec pipe closes on a successful execve (close-on-exec) and carries errno when it failed.
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_pipe[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  ::close(exec_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    close_if_open(child.stdout_fd);
    close_if_open(child.stderr_fd);
    close_if_open(child.stdin_fd);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    throw Error("cannot execute " + request.argv[0] + ": " + std::strerror(child_errno));
  }
  return child;
}

ChildResult run_child(const std::vector<std::string>& argv, const std::string& log_path, double timeout_s) {
  if (argv.empty()) throw Error("run_child: empty command");
  SpawnRequest request;
  request.argv = argv;
  if (!log_path.empty()) {
    request.output = ChildOutput::kLogFile;
    request.log_path = log_path;
  }
  auto start = Clock::now();
  SpawnedChild child;
  try {
    child = spawn_child(request);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + (log_path.empty() ? "" : " (log " + log_path + ")"));
  }
  const pid_t pid = child.pid;

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
