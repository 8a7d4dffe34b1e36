// Helpers for tests that run whole pshard jobs.
#include "tests/support/run_helpers.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/util/child_process.h"

namespace pshard::testing {

std::string pshard_bin() {
  const char* bin = std::getenv("PSHARD_BIN");
  if (!bin) throw Error("PSHARD_BIN is not set (run the test through ctest)");
  return bin;
}

std::string source_dir() {
  const char* dir = std::getenv("PSHARD_SOURCE_DIR");
  if (!dir) throw Error("PSHARD_SOURCE_DIR is not set (run the test through ctest)");
  return dir;
}

void remove_dir_if_passed(const std::string& dir) {
  if (::testing::Test::HasFailure()) {
    std::printf("kept %s for inspection\n", dir.c_str());
    return;
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

std::string fresh_dir(const std::string& name) {
  std::string dir = "/tmp/pshard-test-" + std::to_string(::getpid()) + "-" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

int run_with_timeout(const std::string& command, int timeout_s, const std::string& log_path) {
  std::string full = "timeout -k 10 " + std::to_string(timeout_s) + " " + command + " > '" + log_path + "' 2>&1";
  int status = std::system(full.c_str());
  if (status == -1) throw Error("cannot run: " + full);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Json read_summary(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  if (!in) throw Error("no " + run_dir + "/metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  Json j = Json::parse(last, run_dir + "/metrics.jsonl (last line)");
  if (!j.has("event") || j.at("event").as_string() != "summary") {
    throw Error(run_dir + "/metrics.jsonl: the last line is not a summary: " + last);
  }
  return j;
}

BackgroundJob::BackgroundJob(const std::string& command, const std::string& log) {
  std::string sh = "exec " + command + " > '" + log + "' 2>&1";
  SpawnRequest request;
  request.argv = {"/bin/sh", "-c", sh};
  request.own_process_group = true;  // the destructor kills the whole job
  try {
    pid_ = spawn_child(request).pid;
  } catch (const Error&) {
    pid_ = -1;
  }
}

BackgroundJob::~BackgroundJob() {
  if (pid_ > 0 && !exited_) {
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

std::optional<int> BackgroundJob::wait(std::chrono::seconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return std::nullopt;
}

}  // namespace pshard::testing
