// Which thread takes a process's signals. A signal sent to a process (kill, Ctrl-C, scancel) is taken by any thread
// that does not block it; when it has a handler, a blocking call of that thread fails with EINTR, and ZeroMQ's calls
// (poll, send, receive) then throw. pshard's threads therefore never take these signals: every thread pshard starts
// starts with them blocked (start_thread), and a process that handles them takes them on a thread of its own
// (watch_signals), which does nothing else; a thread a library started before main that gets one passes it on there.
//
//   // first thing in the process, before any thread starts:
//   watch_signals({SIGTERM}, [](int) { g_stop.store(true); });
//   ...
//   io_ = start_thread([this] { io_loop(); });   // in a library: the embedder's handlers never interrupt it
#pragma once

#include <signal.h>

#include <functional>
#include <initializer_list>
#include <thread>
#include <utility>

namespace pshard {

// Blocks, in the calling thread, the signals a process is sent from outside (SIGINT, SIGTERM, SIGHUP, SIGQUIT,
// SIGUSR1, SIGUSR2, SIGALRM) until the end of the scope; a thread started meanwhile keeps them blocked for good.
class ExternalSignalsBlocked {
 public:
  ExternalSignalsBlocked();
  ~ExternalSignalsBlocked();
  ExternalSignalsBlocked(const ExternalSignalsBlocked&) = delete;
  ExternalSignalsBlocked& operator=(const ExternalSignalsBlocked&) = delete;

 private:
  sigset_t saved_;  // the caller's mask
};

// std::thread(body), but the thread never takes a signal sent to the process.
template <class F>
std::thread start_thread(F&& body) {
  ExternalSignalsBlocked blocked;
  return std::thread(std::forward<F>(body));
}

// For the rest of the process, `signals` are taken by a thread of their own, which calls on_signal(signal) for each
// one that arrives. Blocks them in the calling thread: call it before any other thread starts (they inherit the
// block), and once per process. A child process started later gets the default mask back (ChildProcess).
void watch_signals(std::initializer_list<int> signals, std::function<void(int)> on_signal);

}  // namespace pshard
