// ExternalSignalsBlocked and watch_signals: signal masks and the one thread that waits for a process's signals.
#include "common/util/signals.h"

#include <pthread.h>

#include <atomic>
#include <cstring>

#include "common/error.h"

namespace pshard {
namespace {

sigset_t external_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM}) sigaddset(&set, s);
  return set;
}

// Threads that libraries start before main (OpenBLAS's pool) do not block the watched signals, and the kernel may
// hand one to them: this handler, async-signal-safe, passes it on to the watcher, which takes it in sigwait.
std::atomic<bool> g_have_watcher{false};
pthread_t g_watcher;
extern "C" void pass_to_watcher(int sig) {
  if (g_have_watcher.load()) pthread_kill(g_watcher, sig);
}

}  // namespace

ExternalSignalsBlocked::ExternalSignalsBlocked() {
  const sigset_t set = external_signals();
  pthread_sigmask(SIG_BLOCK, &set, &saved_);
}

ExternalSignalsBlocked::~ExternalSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }

void watch_signals(std::initializer_list<int> signals, std::function<void(int)> on_signal) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : signals) sigaddset(&set, s);
  if (const int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr); rc != 0) {
    throw Error(std::string("cannot block the signals to watch: ") + std::strerror(rc));
  }
  // The watcher lives as long as the process: it only waits, so exit() may end it anywhere.
  std::thread watcher([set, on_signal = std::move(on_signal)] {
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) == 0) on_signal(sig);
    }
  });
  g_watcher = watcher.native_handle();
  g_have_watcher.store(true);
  watcher.detach();
  struct sigaction action {};
  action.sa_handler = pass_to_watcher;
  action.sa_flags = SA_RESTART;  // what it interrupts goes on
  sigemptyset(&action.sa_mask);
  for (int s : signals) sigaction(s, &action, nullptr);
}

}  // namespace pshard
