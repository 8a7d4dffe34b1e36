// LocalJob: starts the children (common/util/child_process.h), and one Boost.Asio thread that reads
// their pipes, reaps them, and applies the stop rules.
#include "launcher/local_job.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio.hpp>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "common/error.h"
#include "common/util/child_process.h"
#include "common/util/signals.h"

namespace pshard {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;

std::string signal_name(int sig) {
  switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGPIPE: return "SIGPIPE";
    case SIGHUP: return "SIGHUP";
  }
  return "SIG" + std::to_string(sig);
}

void write_all(int fd, const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the terminal went away: drop output rather than block the supervisor
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

bool ChildExit::failed() const {
  if (unneeded) return false;  // a restart the job, which ended well, no longer needed
  if (!started) return true;
  // A process that does not even end when asked (e.g. frozen) did not finish its part: never a success.
  if (hung) return true;
  // It was running when the job stopped it, was killed after its part was done, or an elastic job went on without
  // it: a consequence, not a cause.
  if (stopped || after_success || dropped) return false;
  // kExitRecordsIncomplete: it did its work but a write failed; the job goes on (see Result). kExitStopped: it
  // stopped at a checkpoint on SIGTERM, as the job's other processes do.
  return exited ? exit_code != 0 && exit_code != kExitRecordsIncomplete && exit_code != kExitStopped : signal != 0;
}

std::string ChildExit::describe() const {
  return name + (pid ? " (pid " + std::to_string(pid) + ")" : "") + " " + ending();
}

std::string ChildExit::ending() const {
  if (!started) return "could not be started: " + start_error;
  const std::string said = error.empty() ? "" : ": " + error;
  const std::string went_on = dropped    ? " (the elastic job went on without it)"
                              : unneeded ? " (a restart the job no longer needed: every worker rank had finished)"
                                         : "";
  if (exited) return "exited with status " + std::to_string(exit_code) + (exit_code != 0 ? said : "") + went_on;
  if (hung) return "did not stop within the grace period after SIGTERM and was killed (SIGKILL)";
  if (signal) {
    return "was killed by signal " + std::to_string(signal) + " (" + signal_name(signal) + ")" +
           (stopped ? " sent by the launcher" : "") +
           (after_success ? " after it had left the job successfully (not a failure)" : "") + went_on;
  }
  return "is still running";
}

struct LocalJob::Impl {
  struct Child {
    ChildSpec spec;
    std::optional<ChildSpec> restart;  // add_restartable(): how it is started again
    int max_restarts = 0;
    ChildExit exit;
    bool reaped = false;
    std::unique_ptr<asio::posix::stream_descriptor> out, err;
    std::unique_ptr<asio::posix::stream_descriptor> in;  // ChildSpec::stdin_text: held open until the child ends
    std::string out_line, err_line;
    std::array<char, 8192> out_buf{}, err_buf{};
  };

  Options opt;
  asio::io_context io;
  asio::steady_timer reap_timer{io}, kill_timer{io}, timeout_timer{io}, end_timer{io}, drain_timer{io};
  std::unique_ptr<asio::signal_set> signals;
  // Owned by the supervisor thread once start() ran; it changes the list
  // (restarts) and the pids under `mu`, so that pids() can read them from
  // any thread. Its own reads need no lock.
  std::vector<std::unique_ptr<Child>> children;
  std::thread thread;
  bool stopping = false;
  int interrupted_by = 0;
  int open_pipes = 0;
  int pending_restarts = 0;  // posted restarts not yet spawned: the job is not over

  mutable std::mutex mu;
  std::condition_variable cv;
  bool spawned = false;
  bool finished = false;
  Result result;

  // --- output --------------------------------------------------------------
  void emit_line(Child& c, int fd, const std::string& line) {
    // The first error a child reports explains its failure better than its exit status alone.
    const size_t at = line.find("error: ");
    if (c.exit.error.empty() && at != std::string::npos) c.exit.error = line.substr(at + 7, 400);
    const std::string prefix = "[" + c.spec.name + "]";
    // The child may already name itself (pshard's log prefix), or name only its role ("[worker]" before it
    // knows its rank): that prefix gives way to the full name instead of being prefixed twice.
    const std::string role_prefix = "[" + c.spec.name.substr(0, c.spec.name.find(' ')) + "] ";
    std::string text;
    // A name without a rank ("worker", pshard join's) also gives way to the child's own "[worker 2]".
    const bool unranked = c.spec.name.find(' ') == std::string::npos;
    if (line.compare(0, prefix.size(), prefix) == 0 ||
        (unranked && line.compare(0, c.spec.name.size() + 2, "[" + c.spec.name + " ") == 0)) {
      text = line + "\n";
    } else if (line.compare(0, role_prefix.size(), role_prefix) == 0) {
      text = prefix + " " + line.substr(role_prefix.size()) + "\n";
    } else {
      text = prefix + " " + line + "\n";
    }
    if (opt.line_sink) {
      opt.line_sink(fd, text);
    } else {
      write_all(fd, text);
    }
  }

  void read_pipe(Child* c, bool is_err) {
    auto& stream = is_err ? c->err : c->out;
    auto& buf = is_err ? c->err_buf : c->out_buf;
    stream->async_read_some(asio::buffer(buf), [this, c, is_err](const boost::system::error_code& ec, size_t n) {
      std::string& line = is_err ? c->err_line : c->out_line;
      const int fd = is_err ? opt.err_fd : opt.out_fd;
      const auto& data = is_err ? c->err_buf : c->out_buf;
      for (size_t i = 0; i < n; ++i) {
        if (data[i] == '\n') {
          emit_line(*c, fd, line);
          line.clear();
        } else {
          line += data[i];
        }
      }
      if (ec) {
        if (!line.empty()) emit_line(*c, fd, line);
        line.clear();
        (is_err ? c->err : c->out)->close();
        --open_pipes;
        maybe_finish();
        return;
      }
      read_pipe(c, is_err);
    });
  }

  // --- spawning --------------------------------------------------------------
  void spawn(Child& c) {
    c.exit.name = c.spec.name;
    c.exit.role = c.spec.role;
    c.exit.may_fail = c.spec.may_fail;
    if (c.spec.argv.empty()) {
      c.exit.start_error = "empty command line";
      return;
    }
    SpawnRequest request;
    request.argv = c.spec.argv;
    request.env = c.spec.env;
    request.output = ChildOutput::kPipes;
    request.stdin = c.spec.stdin_text.empty() ? ChildInput::kNull : ChildInput::kPipe;
    request.own_process_group = true;                 // stop_all signals the group: the child and whatever it started
    request.die_with_parent = true;                   // a launcher killed with SIGKILL leaves no orphans
    const SpawnedChild child = spawn_child(request);  // an Error "cannot execute ..." becomes the start error
    if (child.stdin_fd >= 0) {
      // The text is written from the I/O thread (a pipe holds 64 KiB; more must not block the spawn). A child that
      // exits without reading it must not kill this process with SIGPIPE: the write then fails with EPIPE.
      ::signal(SIGPIPE, SIG_IGN);
      c.in = std::make_unique<asio::posix::stream_descriptor>(io, child.stdin_fd);
      asio::async_write(*c.in, asio::buffer(c.spec.stdin_text), [](const boost::system::error_code&, size_t) {});
    }
    {
      std::lock_guard<std::mutex> lock(mu);  // pids() reads it
      c.exit.pid = child.pid;
    }
    c.out = std::make_unique<asio::posix::stream_descriptor>(io, child.stdout_fd);
    c.err = std::make_unique<asio::posix::stream_descriptor>(io, child.stderr_fd);
    open_pipes += 2;
    read_pipe(&c, false);
    read_pipe(&c, true);
    c.exit.started = true;
  }

  // Every running child gets SIGTERM, or its sigterm_line on its stdin (an ssh child's far side), and decides.
  void pass_on_sigterm() {
    for (auto& c : children) {
      if (!c->exit.started || c->reaped) continue;
      if (!c->spec.sigterm_line.empty() && c->in) {
        asio::async_write(*c->in, asio::buffer(c->spec.sigterm_line), [](const boost::system::error_code&, size_t) {});
      } else {
        ::kill(-static_cast<pid_t>(c->exit.pid), SIGTERM);
      }
    }
  }

  // --- signals to this process (Options::handle_signals) ---------------------------------------------------------
  void on_signal(int sig) {
    if (sig == SIGTERM && opt.forward_sigterm && !stopping) {
      // Every child gets it and decides (checkpoint.on_sigterm = checkpoint: the workers stop at the next step
      // boundary, the others wait for them); the job then ends as usual. A second signal stops it at once.
      write_all(opt.err_fd, "[launch] SIGTERM: passed on to every process (checkpoint.on_sigterm = checkpoint)\n");
      pass_on_sigterm();
      opt.forward_sigterm = false;
      signals->async_wait([this](const boost::system::error_code& ec, int again) {
        if (!ec) on_signal(again);
      });
      return;
    }
    interrupted_by = sig;
    fail("interrupted by " + signal_name(sig));
    stop_all("received " + signal_name(sig));
  }

  // --- stopping and reaping ---------------------------------------------------
  void fail(const std::string& why) {
    if (result.failure.empty()) result.failure = why;
  }

  void stop_all(const std::string& reason) {
    if (stopping) return;
    // Children that already ended are reaped first: they ended on their own
    // (their exit status counts), they were not stopped.
    for (auto& c : children) {
      if (!c->exit.started || c->reaped) continue;
      int status = 0;
      if (::waitpid(static_cast<pid_t>(c->exit.pid), &status, WNOHANG) == static_cast<pid_t>(c->exit.pid)) {
        on_exit(*c, status);
        if (stopping) return;  // that exit already stopped the job
      }
    }
    stopping = true;
    bool any = false;
    for (auto& c : children) {
      if (c->exit.started && !c->reaped) {
        c->exit.stopped = true;
        ::kill(-static_cast<pid_t>(c->exit.pid), SIGTERM);
        any = true;
      }
    }
    if (any) write_all(opt.err_fd, "[launch] stopping every process: " + reason + "\n");
    kill_timer.expires_after(opt.grace);
    kill_timer.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      for (auto& c : children) {
        if (c->exit.started && !c->reaped) {
          write_all(opt.err_fd, "[launch] " + c->spec.name + " did not stop within " +
                                    std::to_string(opt.grace.count()) + " ms: sending SIGKILL\n");
          c->exit.hung = true;
          ::kill(-static_cast<pid_t>(c->exit.pid), SIGKILL);
        }
      }
    });
  }

  void on_exit(Child& c, int status) {
    c.reaped = true;
    if (c.in && c.in->is_open()) c.in->close();
    if (WIFEXITED(status)) {
      c.exit.exited = true;
      c.exit.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      c.exit.signal = WTERMSIG(status);
    }
    // Leftovers of its process group (what a Python worker spawned and left running) end with it, whether the job is
    // stopping or the child ended on its own: nothing a child started outlives pshard launch.
    ::kill(-static_cast<pid_t>(c.exit.pid), SIGKILL);
    if (c.exit.failed() && !stopping && c.spec.role && opt.on_child_failed) opt.on_child_failed(c.spec, c.exit);
    if (c.exit.failed()) {
      if (c.spec.may_fail && !stopping && c.restart && c.max_restarts > 0) {
        write_all(opt.err_fd, "[launch] " + c.exit.describe() + ": starting it again (" +
                                  std::to_string(c.max_restarts - 1) + " restarts left)\n");
        c.exit.restarted = true;
        ChildSpec again = *c.restart;
        again.name = c.spec.name;
        again.role = c.spec.role;
        again.rank = c.spec.rank;
        again.may_fail = true;
        const int left = c.max_restarts - 1;
        // Not inside the reap loop, which iterates over `children`.
        ++pending_restarts;
        asio::post(io, [this, again, left] {
          --pending_restarts;
          if (stopping) return;
          auto n = std::make_unique<Child>();
          n->spec = again;
          n->restart = again;
          n->max_restarts = left;
          n->exit.name = again.name;
          n->exit.role = again.role;
          n->exit.restart_run = true;
          {
            std::lock_guard<std::mutex> lock(mu);  // pids() iterates the list
            children.push_back(std::move(n));
          }
          try {
            spawn(*children.back());
          } catch (const Error& e) {
            children.back()->exit.start_error = e.what();
          }
        });
      } else if (c.spec.may_fail) {
        write_all(opt.err_fd, "[launch] " + c.exit.describe() + " (allowed to fail: the job goes on)\n");
      } else if (!stopping) {
        fail(c.exit.describe());
        stop_all(c.exit.describe());
      }
    } else if (c.spec.ends_job && !stopping) {
      end_timer.expires_after(opt.grace);
      end_timer.async_wait([this, name = c.spec.name](const boost::system::error_code& ec) {
        if (!ec) stop_all(name + " ended and the others did not finish within the grace period");
      });
    }
  }

  void reap() {
    // Two passes: children that end the job (the coordinator) last, so that
    // when a worker and the coordinator end together the worker is the cause.
    for (bool ends_job : {false, true}) {
      for (auto& c : children) {
        if (!c->exit.started || c->reaped || c->spec.ends_job != ends_job) continue;
        int status = 0;
        pid_t r = ::waitpid(static_cast<pid_t>(c->exit.pid), &status, WNOHANG);
        if (r == static_cast<pid_t>(c->exit.pid)) on_exit(*c, status);
      }
    }
    if (all_reaped()) {
      end_timer.cancel();
      kill_timer.cancel();
      timeout_timer.cancel();
      if (signals) signals->cancel();
      // Give the pipes a moment to drain (a grandchild may hold them open).
      drain_timer.expires_after(milliseconds(1000));
      drain_timer.async_wait([this](const boost::system::error_code& ec) {
        if (ec) return;
        for (auto& c : children) {
          if (c->out && c->out->is_open()) c->out->close();
          if (c->err && c->err->is_open()) c->err->close();
        }
      });
      maybe_finish();
      return;
    }
    reap_timer.expires_after(milliseconds(10));
    reap_timer.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) reap();
    });
  }

  bool all_reaped() const {
    if (pending_restarts > 0) return false;
    for (const auto& c : children) {
      if (c->exit.started && !c->reaped) return false;
    }
    return true;
  }

  void maybe_finish() {
    if (!all_reaped() || open_pipes > 0) return;
    drain_timer.cancel();
  }

  void supervise() {
    for (auto& c : children) {
      if (!stopping) {
        try {
          spawn(*c);
        } catch (const Error& e) {
          c->exit.start_error = e.what();
        }
      }
      if (!c->exit.started && c->exit.start_error.empty()) c->exit.start_error = "not started: the job was stopping";
      if (!c->exit.started && !stopping) {
        fail(c->exit.describe());
        stop_all(c->exit.describe());
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      spawned = true;
    }
    cv.notify_all();
    if (opt.handle_signals) {
      signals = std::make_unique<asio::signal_set>(io, SIGINT, SIGTERM);
      signals->async_wait([this](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        on_signal(sig);
      });
    }
    if (opt.timeout.count() > 0) {
      timeout_timer.expires_after(opt.timeout);
      timeout_timer.async_wait([this](const boost::system::error_code& ec) {
        if (ec) return;
        std::string why = "the job timed out after " + std::to_string(opt.timeout.count()) + " ms";
        fail(why);
        stop_all(why);
      });
    }
    reap();
    io.run();
    // Every child has been reaped here (the reaper only stops then).
    bool ended_well = false;  // an ends_job child (the coordinator) exited 0: every worker had left successfully
    for (auto& c : children) ended_well = ended_well || (c->spec.ends_job && c->exit.exited && c->exit.exit_code == 0);
    for (auto& c : children) {
      ChildExit& e = c->exit;
      const bool died = e.exited ? e.exit_code != 0 : e.signal != 0;
      e.dropped = opt.drops_workers && ended_well && e.may_fail && e.started && !e.stopped && !e.hung && died;
      e.unneeded = ended_well && e.restart_run && !e.stopped && !e.hung && (died || !e.started);
      e.after_success = !opt.drops_workers && ended_well && e.may_fail && e.started && !e.exited && !e.stopped &&
                        !e.hung && e.signal != 0;
    }
    Result r;
    for (auto& c : children) r.children.push_back(c->exit);
    r.failure = result.failure;
    if (interrupted_by) {
      r.exit_code = 128 + interrupted_by;
    } else if (!r.failure.empty()) {
      r.exit_code = 1;
    } else {
      for (const ChildExit& e : r.children) {
        if (e.failed() && !e.restarted) {
          r.exit_code = 1;  // a may_fail child failed: the job ran on, but it did not fully succeed
          if (r.failure.empty()) r.failure = e.describe();
        }
      }
      for (const ChildExit& e : r.children) {
        if (r.exit_code == 0 && e.exited && e.exit_code == kExitStopped) {
          r.exit_code = kExitStopped;
          r.failure = e.describe() + ": the job stopped at a checkpoint (checkpoint.on_sigterm)";
        }
      }
      for (const ChildExit& e : r.children) {
        if (r.exit_code == 0 && e.exited && e.exit_code == kExitRecordsIncomplete) {
          r.exit_code = kExitRecordsIncomplete;
          r.failure = e.describe() + ": the run's records are incomplete";
        }
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      result = r;
      finished = true;
    }
    cv.notify_all();
  }
};

LocalJob::LocalJob(const Options& options) : impl_(std::make_unique<Impl>()) { impl_->opt = options; }

LocalJob::~LocalJob() {
  if (impl_->thread.joinable()) {
    stop("the job object was destroyed");
    impl_->thread.join();
  }
}

void LocalJob::add(const ChildSpec& child) {
  if (impl_->thread.joinable()) throw Error("launcher: add() after start()");
  auto c = std::make_unique<Impl::Child>();
  c->spec = child;
  c->exit.name = child.name;
  c->exit.role = child.role;
  impl_->children.push_back(std::move(c));
}

void LocalJob::start() {
  if (impl_->thread.joinable()) throw Error("launcher: start() called twice");
  if (impl_->children.empty()) throw Error("launcher: a job needs at least one process");
  impl_->thread = start_thread([this] { impl_->supervise(); });
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait(lock, [&] { return impl_->spawned; });  // fork/exec of each child is quick and bounded
}

LocalJob::Result LocalJob::wait() {
  if (!impl_->thread.joinable()) throw Error("launcher: wait() before start()");
  impl_->thread.join();
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->result;
}

std::optional<LocalJob::Result> LocalJob::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  if (!impl_->cv.wait_for(lock, timeout, [&] { return impl_->finished; })) return std::nullopt;
  return impl_->result;
}

void LocalJob::add_restartable(const ChildSpec& child, const ChildSpec& restart, int max_restarts) {
  add(child);
  impl_->children.back()->spec.may_fail = true;
  impl_->children.back()->restart = restart;
  impl_->children.back()->max_restarts = max_restarts;
}

LocalJob::Result LocalJob::run() {
  start();
  return wait();
}

void LocalJob::stop(const std::string& reason) {
  asio::post(impl_->io, [this, reason] { impl_->stop_all(reason); });
}

void LocalJob::pass_on_sigterm() {
  asio::post(impl_->io, [this] { impl_->pass_on_sigterm(); });
}

std::vector<int64_t> LocalJob::pids() const {
  std::lock_guard<std::mutex> lock(impl_->mu);  // the supervisor thread appends restarted children
  std::vector<int64_t> out;
  for (const auto& c : impl_->children) out.push_back(c->exit.pid);
  return out;
}

}  // namespace pshard
