// spawn_child and run_child: the program's environment, output and process group, and the errors of a program that
// cannot be started.
#include "common/util/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/error.h"

namespace {

using namespace pshard;

std::string read_fd(int fd) {
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

int wait_exit(pid_t pid) {
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string temp_path(const std::string& name) {
  return "/tmp/pshard-child-process-test-" + std::to_string(::getpid()) + "-" + name;
}

TEST(SpawnChild, PipesCarryOutputAndErrorApartAndTheEnvironmentIsSetOverOurs) {
  ::setenv("PSHARD_CHILD_TEST_KEPT", "kept", 1);
  ::setenv("PSHARD_CHILD_TEST_REPLACED", "old", 1);
  SpawnRequest r;
  r.argv = {"sh", "-c",
            "echo out $PSHARD_CHILD_TEST_KEPT $PSHARD_CHILD_TEST_REPLACED $PSHARD_CHILD_TEST_NEW; "
            "echo err >&2; read line; echo stdin=[$line]; exit 3"};
  r.env = {"PSHARD_CHILD_TEST_REPLACED=new", "PSHARD_CHILD_TEST_NEW=added"};
  r.output = ChildOutput::kPipes;
  r.stdin = ChildInput::kNull;
  SpawnedChild c = spawn_child(r);
  ASSERT_GT(c.pid, 0);
  EXPECT_EQ(read_fd(c.stdout_fd), "out kept new added\nstdin=[]\n");
  EXPECT_EQ(read_fd(c.stderr_fd), "err\n");
  EXPECT_EQ(wait_exit(c.pid), 3);
}

TEST(SpawnChild, AProgramThatCannotBeExecutedIsAnErrorNamingIt) {
  SpawnRequest r;
  r.argv = {"pshard-no-such-program-anywhere"};
  r.output = ChildOutput::kPipes;
  try {
    spawn_child(r);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cannot execute pshard-no-such-program-anywhere: No such file or directory");
  }
  const std::string not_executable = temp_path("not-executable");
  std::ofstream(not_executable) << "echo hi\n";
  std::filesystem::permissions(not_executable,
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  r.argv = {not_executable};
  try {
    spawn_child(r);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot execute " + not_executable + ": Permission denied");
  }
  std::filesystem::remove(not_executable);
  // The failed children were reaped: none is left to wait for.
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
}

TEST(SpawnChild, ALogFileGetsBothStreamsAppended) {
  const std::string log = temp_path("log");
  std::filesystem::remove(log);
  { std::ofstream(log) << "before\n"; }
  SpawnRequest r;
  r.argv = {"sh", "-c", "echo out; echo err >&2"};
  r.output = ChildOutput::kLogFile;
  r.log_path = log;
  EXPECT_EQ(wait_exit(spawn_child(r).pid), 0);
  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  EXPECT_EQ(text.str(), "before\nout\nerr\n");
  std::filesystem::remove(log);

  r.log_path = "/nonexistent-dir/child.log";
  try {
    spawn_child(r);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "cannot start sh: cannot open its log /nonexistent-dir/child.log: No such file or directory");
  }
}

TEST(SpawnChild, AProcessGroupOfItsOwnIsKilledWholeByItsId) {
  const std::string marker = temp_path("grandchild");
  std::filesystem::remove(marker);
  SpawnRequest r;
  // The shell starts a grandchild that would write the marker in 2 s; killing the group must stop it too.
  r.argv = {"sh", "-c", "(sleep 2; touch " + marker + ") & wait"};
  r.own_process_group = true;
  SpawnedChild c = spawn_child(r);
  EXPECT_EQ(::getpgid(c.pid), c.pid);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(::kill(-c.pid, SIGKILL), 0);
  EXPECT_EQ(wait_exit(c.pid), 128 + SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the grandchild outlived its group's kill";
  std::filesystem::remove(marker);
}

TEST(RunChild, ReturnsTheExitCodeAndStopsAProgramPastItsTimeLimit) {
  ChildResult ok = run_child({"sh", "-c", "exit 7"}, "", 30);
  EXPECT_EQ(ok.exit_code, 7);
  EXPECT_FALSE(ok.timed_out);
  ChildResult slow = run_child({"sleep", "30"}, "", 0.3);
  EXPECT_TRUE(slow.timed_out);
  EXPECT_EQ(slow.exit_code, 128 + SIGTERM);
  EXPECT_LT(slow.seconds, 10);
  EXPECT_THROW(run_child({"pshard-no-such-program-anywhere"}, "", 5), Error);
}

}  // namespace
