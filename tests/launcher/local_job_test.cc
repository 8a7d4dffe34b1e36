// LocalJob: output prefixing, stop rules, exit reporting, free ports.
#include "launcher/local_job.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "common/error.h"
#include "common/util/child_process.h"

namespace pshard {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string child_exe() { return std::string(PSHARD_TEST_CHILD); }

// A temporary file for a job's output.
struct TempFile {
  std::string path;
  int fd = -1;
  TempFile() {
    char tmpl[] = "/tmp/pshard_local_job_XXXXXX";
    fd = ::mkstemp(tmpl);
    path = tmpl;
  }
  ~TempFile() {
    ::close(fd);
    ::unlink(path.c_str());
  }
  std::string read() const {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

bool gone(int64_t pid) { return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

// "[worker] error: ..." from worker 1 (logged before it knew its rank) reads "[worker 1] error: ...",
// not "[worker 1] [worker] error: ...".
TEST(LocalJob, AChildsRoleOnlyPrefixGivesWayToItsFullName) {
  TempFile out, err;
  LocalJob::Options opt;
  opt.out_fd = out.fd;
  opt.err_fd = err.fd;
  LocalJob job(opt);
  job.add({"printer 2", {child_exe(), "print"}, {}});
  LocalJob::Result r = job.run();
  EXPECT_EQ(r.exit_code, 0) << r.failure;
  const std::string o = out.read();
  EXPECT_NE(o.find("[printer 2] already prefixed\n"), std::string::npos) << o;
  EXPECT_EQ(o.find("[printer 2] [printer]"), std::string::npos) << o;
}

// A child that did its work but could not write all its records exits 3: the job is not stopped
// for it, and the job's result says so with the same status.
TEST(LocalJob, RecordsIncompleteIsNotAFailureButTheJobsStatus) {
  TempFile out, err;
  LocalJob::Options opt;
  opt.out_fd = out.fd;
  opt.err_fd = err.fd;
  LocalJob job(opt);
  job.add({"coordinator", {child_exe(), "exit", "74", "0"}, {}});
  job.add({"worker 0", {child_exe(), "exit", "0", "300"}, {}});
  LocalJob::Result r = job.run();
  EXPECT_EQ(r.exit_code, kExitRecordsIncomplete);
  EXPECT_NE(r.failure.find("exited with status 74: the run's records are incomplete"), std::string::npos) << r.failure;
  ASSERT_EQ(r.children.size(), 2u);
  EXPECT_FALSE(r.children[1].stopped) << "the worker was stopped although nothing failed";
  EXPECT_TRUE(r.children[1].exited);
  EXPECT_EQ(r.children[1].exit_code, 0);
}

// ChildSpec::stdin_text reaches the child's stdin, which stays open while the child runs (cat does not end on its
// own) and ends when the job stops it; a child without one reads /dev/null (its cat ends at once).
TEST(LocalJob, StdinTextReachesTheChildAndStaysOpenUntilItEnds) {
  TempFile out, err;
  LocalJob::Options opt;
  opt.out_fd = out.fd;
  opt.err_fd = err.fd;
  opt.grace = std::chrono::milliseconds(2000);
  LocalJob job(opt);
  ChildSpec reader{"reader", {"/bin/cat"}, {}};
  reader.stdin_text = "the plan\nsecond line\n";
  job.add(reader);
  job.add({"no input", {"/bin/cat"}, {}, /*may_fail=*/true});
  job.start();
  EXPECT_FALSE(job.wait_for(std::chrono::milliseconds(500))) << "cat ended: its stdin was closed";
  job.stop("test over");
  const LocalJob::Result r = job.wait();
  ASSERT_EQ(r.children.size(), 2u);
  EXPECT_TRUE(r.children[0].stopped) << r.children[0].describe();
  EXPECT_FALSE(r.children[0].hung) << "cat ignored SIGTERM";
  EXPECT_TRUE(r.children[1].exited) << r.children[1].describe();
  EXPECT_EQ(r.children[1].exit_code, 0);
  EXPECT_FALSE(r.children[1].stopped);
  const std::string o = out.read();
  EXPECT_NE(o.find("[reader] the plan\n[reader] second line\n"), std::string::npos) << o;
}

// pass_on_sigterm: a child with a sigterm_line reads that line on its stdin (an ssh child carries it to its host);
// the others get SIGTERM and decide (here: a shell that exits 75, the status of a job stopped at a checkpoint).
TEST(LocalJob, PassedOnSigtermIsALineForAChildThatHasOneAndASignalForTheOthers) {
  TempFile out, err;
  LocalJob::Options opt;
  opt.out_fd = out.fd;
  opt.err_fd = err.fd;
  LocalJob job(opt);
  ChildSpec host{"host", {"/bin/sh", "-c", "read plan; read line; echo \"$plan then $line\"; exit 75"}, {}};
  host.stdin_text = "the plan\n";
  host.sigterm_line = "sigterm\n";
  job.add(host);
  job.add({"signalled", {"/bin/sh", "-c", "trap 'exit 75' TERM; while :; do sleep 0.05; done"}, {}});
  job.start();
  EXPECT_FALSE(job.wait_for(std::chrono::milliseconds(300))) << "a child ended before the SIGTERM";
  job.pass_on_sigterm();
  const std::optional<LocalJob::Result> r = job.wait_for(std::chrono::seconds(10));
  ASSERT_TRUE(r.has_value()) << "the children did not end after the SIGTERM was passed on";
  EXPECT_EQ(r->exit_code, kExitStopped) << r->failure;
  ASSERT_EQ(r->children.size(), 2u);
  for (const ChildExit& c : r->children) {
    EXPECT_TRUE(c.exited) << c.describe();
    EXPECT_EQ(c.exit_code, kExitStopped) << c.describe();
    EXPECT_FALSE(c.stopped) << c.describe();
  }
  const std::string o = out.read();
  EXPECT_NE(o.find("[host] the plan then sigterm\n"), std::string::npos) << o;
}

TEST(LocalJob, PrefixesEveryOutputLineWithTheChildName) {
  TempFile out, err;
  LocalJob::Options opt;
  opt.out_fd = out.fd;
  opt.err_fd = err.fd;
  LocalJob job(opt);
  job.add({"printer", {child_exe(), "print"}, {}});
  job.add({"worker 3", {child_exe(), "env", "PSHARD_JOB_TOKEN"}, {"PSHARD_JOB_TOKEN=abc123"}});
  LocalJob::Result r = job.run();
  EXPECT_EQ(r.exit_code, 0) << r.failure;
  std::string o = out.read(), e = err.read();
  std::string pid = std::to_string(job.pids()[0]);
  EXPECT_NE(o.find("[printer] hello " + pid + "\n"), std::string::npos) << o;
  EXPECT_NE(o.find("[printer] second line\n"), std::string::npos) << o;
  EXPECT_NE(o.find("[printer] already prefixed\n"), std::string::npos) << o;
  EXPECT_EQ(o.find("[printer] [printer]"), std::string::npos) << o;
  EXPECT_NE(o.find("[printer] no newline at the end\n"), std::string::npos) << o;
  EXPECT_NE(o.find("[worker 3] PSHARD_JOB_TOKEN=abc123\n"), std::string::npos) << o;
  EXPECT_NE(e.find("[printer] to stderr\n"), std::string::npos) << e;
  EXPECT_EQ(o.find("to stderr"), std::string::npos) << o;
  ASSERT_EQ(r.children.size(), 2u);
  EXPECT_TRUE(r.children[0].exited);
  EXPECT_EQ(r.children[0].exit_code, 0);
}

TEST(LocalJob, AFailingChildStopsTheOthersAndIsNamed) {
  TempFile out, err;
  LocalJob::Options opt;
  opt.out_fd = out.fd;
  opt.err_fd = err.fd;
  opt.grace = milliseconds(2000);
  LocalJob job(opt);
  job.add({"server 0", {child_exe(), "sleep", "60000"}, {}});
  job.add({"worker 1", {child_exe(), "exit", "3", "200"}, {}});
  job.add({"worker 0", {child_exe(), "sleep", "60000"}, {}});
  auto t0 = Clock::now();
  LocalJob::Result r = job.run();
  EXPECT_LT(Clock::now() - t0, milliseconds(3000));
  EXPECT_EQ(r.exit_code, 1);
  std::string pid = std::to_string(job.pids()[1]);
  EXPECT_EQ(r.failure, "worker 1 (pid " + pid + ") exited with status 3");
  EXPECT_TRUE(r.children[0].stopped);
  EXPECT_EQ(r.children[0].signal, SIGTERM);
  EXPECT_FALSE(r.children[0].failed());
  EXPECT_TRUE(r.children[1].failed());
  for (int64_t p : job.pids()) EXPECT_TRUE(gone(p)) << p;
  EXPECT_NE(err.read().find("stopping every process: worker 1"), std::string::npos) << err.read();
}

// The first error line a failing child printed says why it failed: launch's headline quotes it.
TEST(LocalJob, AFailureIsDescribedWithTheChildsFirstErrorLine) {
  TempFile out;
  LocalJob::Options opt;
  opt.out_fd = opt.err_fd = out.fd;
  LocalJob job(opt);
  job.add({"worker 0", {child_exe(), "fail", "1", "the training set has 60000 samples"}, {}});
  LocalJob::Result r = job.run();
  EXPECT_EQ(r.children[0].error, "the training set has 60000 samples");
  EXPECT_EQ(r.children[0].describe(), "worker 0 (pid " + std::to_string(r.children[0].pid) +
                                          ") exited with status 1: the training set has 60000 samples");
}

// `pshard launch ... -- python3 train.py`: a program without a '/' is found in the child's PATH, as a shell would.
TEST(LocalJob, AProgramWithoutASlashIsFoundInThePath) {
  TempFile out;
  LocalJob::Options opt;
  opt.out_fd = opt.err_fd = out.fd;
  LocalJob found(opt);
  found.add({"worker 0", {"sh", "-c", "echo found; exit 3"}, {}});
  LocalJob::Result r = found.run();
  EXPECT_TRUE(r.children[0].started);
  EXPECT_EQ(r.children[0].exit_code, 3);
  EXPECT_NE(out.read().find("[worker 0] found"), std::string::npos) << out.read();
  LocalJob missing(opt);
  missing.add({"worker 1", {"pshard-no-such-program-anywhere"}, {"PATH=/usr/bin:/bin"}});
  r = missing.run();
  EXPECT_FALSE(r.children[0].started);
  EXPECT_EQ(r.children[0].start_error, "cannot execute pshard-no-such-program-anywhere: No such file or directory");
}

TEST(LocalJob, AChildKilledByASignalIsReportedWithTheSignal) {
  TempFile out;
  LocalJob::Options opt;
  opt.out_fd = opt.err_fd = out.fd;
  LocalJob job(opt);
  job.add({"worker 2", {child_exe(), "sleep", "60000"}, {}});
  job.add({"server 0", {child_exe(), "sleep", "60000"}, {}});
  job.start();
  ::kill(static_cast<pid_t>(job.pids()[0]), SIGKILL);
  LocalJob::Result r = job.wait();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.failure.find("worker 2 (pid " + std::to_string(job.pids()[0]) + ") was killed by signal 9 (SIGKILL)"),
            std::string::npos)
      << r.failure;
  EXPECT_FALSE(r.children[1].failed());
}

TEST(LocalJob, AChildIgnoringSigtermGetsSigkillAfterTheGracePeriod) {
  TempFile out;
  LocalJob::Options opt;
  opt.out_fd = opt.err_fd = out.fd;
  opt.grace = milliseconds(300);
  LocalJob job(opt);
  job.add({"stubborn", {child_exe(), "stubborn", "60000"}, {}});
  job.add({"quitter", {child_exe(), "exit", "1", "300"}, {}});
  auto t0 = Clock::now();
  LocalJob::Result r = job.run();
  EXPECT_LT(Clock::now() - t0, milliseconds(3000));
  EXPECT_EQ(r.children[0].signal, SIGKILL);
  EXPECT_TRUE(r.children[0].stopped);
  EXPECT_NE(out.read().find("stubborn did not stop within 300 ms: sending SIGKILL"), std::string::npos) << out.read();
  EXPECT_TRUE(r.children[0].hung);
  EXPECT_TRUE(r.children[0].failed());
}

// A job that otherwise ended well is not a success when a process had to be killed because it
// ignored SIGTERM (e.g. a frozen worker under failure_policy = continue).
TEST(LocalJob, AChildKilledAfterTheGracePeriodFailsAnOtherwiseGoodJob) {
  TempFile out;
  LocalJob::Options opt;
  opt.out_fd = opt.err_fd = out.fd;
  opt.grace = milliseconds(300);
  LocalJob job(opt);
  job.add({"coordinator", {child_exe(), "exit", "0", "100"}, {}, false, /*ends_job=*/true});
  job.add({"worker 1", {child_exe(), "stubborn", "60000"}, {}, /*may_fail=*/true});
  LocalJob::Result r = job.run();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.children[1].hung);
  EXPECT_NE(r.failure.find("worker 1 (pid"), std::string::npos) << r.failure;
  EXPECT_NE(r.failure.find("did not stop within the grace period after SIGTERM and was killed (SIGKILL)"),
            std::string::npos)
      << r.failure;
}

// Under failure_policy = continue the coordinator exits 0 only when every worker left the job successfully: a worker
// killed afterwards (SIGKILL while its interpreter exits) had done its part, and the job succeeded. A worker that
// exits non-zero on its own still fails it.
TEST(LocalJob, AMayFailChildKilledAfterTheCoordinatorEndedWellIsNoFailure) {
  TempFile out;
  LocalJob::Options opt;
  opt.out_fd = opt.err_fd = out.fd;
  LocalJob job(opt);
  job.add({"coordinator", {child_exe(), "exit", "0", "100"}, {}, false, /*ends_job=*/true});
  job.add({"worker 1", {"/bin/sh", "-c", "kill -KILL $$"}, {}, /*may_fail=*/true});
  LocalJob::Result r = job.run();
  EXPECT_EQ(r.exit_code, 0) << r.failure << out.read();
  EXPECT_TRUE(r.children[1].after_success);
  EXPECT_FALSE(r.children[1].failed());
  EXPECT_NE(r.children[1].describe().find("was killed by signal 9 (SIGKILL) after it had left the job successfully"),
            std::string::npos)
      << r.children[1].describe();

  LocalJob failing(opt);
  failing.add({"coordinator", {child_exe(), "exit", "3", "100"}, {}, false, /*ends_job=*/true});
  failing.add({"worker 1", {"/bin/sh", "-c", "kill -KILL $$"}, {}, /*may_fail=*/true});
  r = failing.run();
  EXPECT_NE(r.exit_code, 0);  // the coordinator did not end well: the kill may have cost the job a worker
  EXPECT_FALSE(r.children[1].after_success);

  LocalJob exiting(opt);
  exiting.add({"coordinator", {child_exe(), "exit", "0", "100"}, {}, false, /*ends_job=*/true});
  exiting.add({"worker 1", {child_exe(), "exit", "1", "10"}, {}, /*may_fail=*/true});
  r = exiting.run();
  EXPECT_EQ(r.exit_code, 1);  // its own exit status says it failed
}

TEST(LocalJob, AMayFailChildDoesNotStopTheJobButIsReported) {
  TempFile out;
  LocalJob::Options opt;
  opt.out_fd = opt.err_fd = out.fd;
  LocalJob job(opt);
  job.add({"worker 1", {child_exe(), "exit", "4", "50"}, {}, /*may_fail=*/true});
  job.add({"worker 0", {child_exe(), "sleep", "500"}, {}});
  LocalJob::Result r = job.run();
  EXPECT_TRUE(r.children[1].exited);  // ran to its end
  EXPECT_EQ(r.children[1].exit_code, 0);
  EXPECT_FALSE(r.children[1].stopped);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.failure.find("worker 1"), std::string::npos) << r.failure;
}

// A child that leaves a process of its own running (a Python worker's helper) does not leave it behind the job.
TEST(LocalJob, WhatAChildLeftRunningEndsWithIt) {
  TempFile out, pid_file;
  LocalJob::Options opt;
  opt.out_fd = opt.err_fd = out.fd;
  LocalJob job(opt);
  job.add({"worker 0", {"/bin/sh", "-c", "sleep 60 & echo $! > " + pid_file.path + "; exit 0"}, {}});
  LocalJob::Result r = job.run();
  EXPECT_EQ(r.exit_code, 0) << r.failure << out.read();
  const int64_t left = std::atoll(pid_file.read().c_str());
  ASSERT_GT(left, 0) << out.read();
  // Ended: no such process, or a zombie its new parent has not reaped yet.
  auto ended = [&] {
    if (gone(left)) return true;
    std::ifstream stat("/proc/" + std::to_string(left) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t paren = text.rfind(')');
    return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z';
  };
  const auto deadline = Clock::now() + milliseconds(3000);
  while (!ended() && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(ended()) << "the child's background process " << left << " outlived the job";
  if (!ended()) ::kill(static_cast<pid_t>(left), SIGKILL);
}

TEST(LocalJob, AnEndsJobChildGivesTheOthersAGracePeriodThenStopsThem) {
  TempFile out;
  LocalJob::Options opt;
  opt.out_fd = opt.err_fd = out.fd;
  opt.grace = milliseconds(300);
  LocalJob job(opt);
  job.add({"coordinator", {child_exe(), "exit", "0", "100"}, {}, false, /*ends_job=*/true});
  job.add({"server 0", {child_exe(), "sleep", "60000"}, {}});
  auto t0 = Clock::now();
  LocalJob::Result r = job.run();
  EXPECT_LT(Clock::now() - t0, milliseconds(3000));
  EXPECT_EQ(r.exit_code, 0) << r.failure;
  EXPECT_TRUE(r.children[1].stopped);
}

TEST(LocalJob, AMissingExecutableIsAClearFailure) {
  TempFile out;
  LocalJob::Options opt;
  opt.out_fd = opt.err_fd = out.fd;
  LocalJob job(opt);
  job.add({"server 0", {child_exe(), "sleep", "60000"}, {}});
  job.add({"worker 0", {"/nonexistent/pshard-worker"}, {}});
  LocalJob::Result r = job.run();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.failure.find("worker 0"), std::string::npos) << r.failure;
  EXPECT_NE(r.failure.find("cannot execute /nonexistent/pshard-worker: No such file or directory"), std::string::npos)
      << r.failure;
  EXPECT_TRUE(r.children[0].stopped);
}

TEST(LocalJob, TheJobTimeoutStopsEverything) {
  TempFile out;
  LocalJob::Options opt;
  opt.out_fd = opt.err_fd = out.fd;
  opt.timeout = milliseconds(300);
  LocalJob job(opt);
  job.add({"worker 0", {child_exe(), "sleep", "60000"}, {}});
  auto t0 = Clock::now();
  LocalJob::Result r = job.run();
  EXPECT_LT(Clock::now() - t0, milliseconds(3000));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.failure, "the job timed out after 300 ms");
}

TEST(LocalJob, StopFromAnotherThreadIsNotAFailure) {
  TempFile out;
  LocalJob::Options opt;
  opt.out_fd = opt.err_fd = out.fd;
  LocalJob job(opt);
  job.add({"worker 0", {child_exe(), "sleep", "60000"}, {}});
  job.start();
  EXPECT_FALSE(job.wait_for(milliseconds(100)).has_value());
  job.stop("test");
  auto r = job.wait_for(milliseconds(5000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 0) << r->failure;
  EXPECT_TRUE(gone(job.pids()[0]));
}

// A may_fail child with restart_argv is started again each time it fails,
// up to max_restarts times, also when it is the last child running.
TEST(LocalJob, ARestartableChildIsStartedAgainUpToItsLimit) {
  TempFile out;
  LocalJob::Options opt;
  opt.out_fd = opt.err_fd = out.fd;
  LocalJob job(opt);
  job.add_restartable({"worker 1", {child_exe(), "exit", "3", "20"}, {}},
                      {"worker 1", {child_exe(), "exit", "3", "20"}, {}}, 2);
  LocalJob::Result r = job.run();
  ASSERT_EQ(r.children.size(), 3u) << out.read();  // the first run and two restarts
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(r.children[i].exited) << i;
    EXPECT_EQ(r.children[i].exit_code, 3) << i;
    EXPECT_EQ(r.children[i].restarted, i < 2) << i;
  }
  EXPECT_EQ(r.exit_code, 1);  // the last run failed and was not restarted
  EXPECT_EQ(out.read().find("still running"), std::string::npos) << out.read();
}

// A worker killed after its part was done is started again; the restart comes after the job ended (its coordinator
// is gone) and fails. The coordinator exited 0, so every worker rank had finished: the restart was not needed, and
// the job succeeded.
TEST(LocalJob, ARestartTheJobNoLongerNeededIsNoFailure) {
  TempFile out;
  LocalJob::Options opt;
  opt.out_fd = opt.err_fd = out.fd;
  LocalJob job(opt);
  job.add({"coordinator", {child_exe(), "exit", "0", "300"}, {}, false, /*ends_job=*/true});
  job.add_restartable({"worker 1", {"/bin/sh", "-c", "kill -KILL $$"}, {}},
                      {"worker 1", {"/bin/sh", "-c", "sleep 0.5; exit 1"}, {}}, 1);
  LocalJob::Result r = job.run();
  ASSERT_EQ(r.children.size(), 3u) << out.read();
  EXPECT_TRUE(r.children[1].restarted);
  EXPECT_TRUE(r.children[2].restart_run);
  EXPECT_TRUE(r.children[2].unneeded);
  EXPECT_EQ(r.exit_code, 0) << r.failure << out.read();
  EXPECT_NE(r.children[2].describe().find("a restart the job no longer needed"), std::string::npos)
      << r.children[2].describe();

  // The coordinator did not end well: the restart's failure counts.
  LocalJob failing(opt);
  failing.add({"coordinator", {child_exe(), "exit", "4", "300"}, {}, false, /*ends_job=*/true});
  failing.add_restartable({"worker 1", {"/bin/sh", "-c", "kill -KILL $$"}, {}},
                          {"worker 1", {"/bin/sh", "-c", "sleep 0.5; exit 1"}, {}}, 1);
  r = failing.run();
  EXPECT_NE(r.exit_code, 0);
  ASSERT_EQ(r.children.size(), 3u) << out.read();
  EXPECT_FALSE(r.children[2].unneeded);
}

// pids() from another thread while the supervisor thread restarts a child
// (appends to its list, sets the new pid): a data race under TSan before
// pids() took the job's lock.
TEST(LocalJob, PidsCanBeReadWhileAChildIsRestarted) {
  TempFile out;
  LocalJob::Options opt;
  opt.out_fd = opt.err_fd = out.fd;
  LocalJob job(opt);
  job.add_restartable({"worker 1", {child_exe(), "exit", "3", "20"}, {}},
                      {"worker 1", {child_exe(), "exit", "3", "20"}, {}}, 3);
  job.start();
  std::atomic<bool> done{false};
  size_t seen = 0;
  std::thread reader([&] {
    while (!done) seen = std::max(seen, job.pids().size());
  });
  LocalJob::Result r = job.wait();
  done = true;
  reader.join();
  EXPECT_EQ(r.children.size(), 4u);  // the first run and three restarts
  EXPECT_EQ(job.pids().size(), 4u);
  EXPECT_GE(seen, 1u);
}

TEST(FreePorts, AreDistinctAndBindable) {
  std::vector<int> ports = pick_free_ports(8);
  std::set<int> unique(ports.begin(), ports.end());
  EXPECT_EQ(unique.size(), 8u);
  for (int port : ports) {
    EXPECT_GT(port, 0);
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << port;
    ::close(fd);
  }
  EXPECT_THROW(pick_free_port("not-an-ip"), Error);
}

}  // namespace
}  // namespace pshard
