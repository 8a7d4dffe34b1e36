// start_thread and watch_signals: pshard's threads never take a signal sent to the process, and a process that
// watches one takes every such signal on its watcher, also when the kernel hands it to a thread a library started
// before (OpenBLAS's pool), while ZeroMQ polls go on uninterrupted.
#include "common/util/signals.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <zmq.hpp>

namespace {

using namespace pshard;
using Clock = std::chrono::steady_clock;

bool blocked_here(int sig) {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, sig) == 1;
}

TEST(Signals, AThreadStartedByPshardBlocksTheProcessSignalsAndTheCallerKeepsItsMask) {
  ASSERT_FALSE(blocked_here(SIGTERM));
  bool term = false, intr = false, usr1 = false, segv = true;
  std::thread t = start_thread([&] {
    term = blocked_here(SIGTERM);
    intr = blocked_here(SIGINT);
    usr1 = blocked_here(SIGUSR1);
    segv = blocked_here(SIGSEGV);
  });
  t.join();
  EXPECT_TRUE(term);
  EXPECT_TRUE(intr);
  EXPECT_TRUE(usr1);
  EXPECT_FALSE(segv) << "a fault is the thread's own and must reach it";
  EXPECT_FALSE(blocked_here(SIGTERM)) << "start_thread changed its caller's mask";
}

// The child: a plain thread started before the watch (as a library's pool is), then the watch, then ZeroMQ polls of
// 1.5 s on its main thread and on a thread of pshard's while the parent sends SIGTERMs. Exit status: 0 when the
// watcher saw them and no poll was cut short, 2 when a poll threw (EINTR), 3 when a poll ended early, 4 when no
// signal reached the watcher.
[[noreturn]] void child(int ready_fd) {
  std::atomic<bool> done{false};
  std::thread library_pool([&] {
    while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  std::atomic<int> seen{0};
  watch_signals({SIGTERM}, [&seen](int sig) {
    if (sig == SIGTERM) seen.fetch_add(1);
  });
  zmq::context_t ctx;
  auto poll_quietly = [&ctx]() -> int {
    zmq::socket_t sock(ctx, zmq::socket_type::pull);
    sock.bind("inproc://quiet-" + std::to_string(reinterpret_cast<uintptr_t>(&sock)));
    zmq::pollitem_t item{sock.handle(), 0, ZMQ_POLLIN, 0};
    const auto start = Clock::now();
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(1500));
    } catch (const zmq::error_t&) {
      return 2;
    }
    return Clock::now() - start < std::chrono::milliseconds(1400) ? 3 : 0;
  };
  int pshard_thread_status = 0;
  std::thread io = start_thread([&] { pshard_thread_status = poll_quietly(); });
  const char go = 'g';
  if (::write(ready_fd, &go, 1) != 1) ::_exit(5);
  const int main_status = poll_quietly();
  io.join();
  done.store(true);
  library_pool.join();
  if (main_status != 0) ::_exit(main_status);
  if (pshard_thread_status != 0) ::_exit(pshard_thread_status);
  ::_exit(seen.load() > 0 ? 0 : 4);
}

TEST(Signals, AWatchingProcessTakesEverySigtermOnItsWatcherWhileItsPollsGoOn) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    child(fds[1]);
  }
  ::close(fds[1]);
  char go = 0;
  ASSERT_EQ(::read(fds[0], &go, 1), 1);
  ::close(fds[0]);
  for (int i = 0; i < 200; ++i) {
    ::kill(pid, SIGTERM);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  int status = 0;
  const auto end = Clock::now() + std::chrono::seconds(20);
  pid_t got = 0;
  while ((got = ::waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (got == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "the child did not end within 20 s";
  }
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: a poll threw, 3: a poll ended early, 4: the watcher saw no SIGTERM";
}

}  // namespace
