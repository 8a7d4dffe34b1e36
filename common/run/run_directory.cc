// Run directories: the run id file, the fresh-directory rule and --start-over (see run_directory.h).
#include "common/run/run_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "common/error.h"
#include "common/metrics/metrics_writer.h"
#include "common/util/binary_file.h"
#include "common/util/host.h"
#include "common/util/json.h"

namespace pshard {
namespace {

namespace fs = std::filesystem;

// The file whose lock is a run directory's claim (RunDirClaim); hidden, and no run file (run_files_in).
constexpr const char* kClaimFile = ".claim";

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// DIR.old-1, DIR.old-2, ...: the first that does not exist.
std::string first_free_aside(const std::string& dir) {
  std::error_code ec;
  for (int n = 1;; ++n) {
    const std::string candidate = dir + ".old-" + std::to_string(n);
    if (!fs::exists(candidate, ec)) return candidate;
  }
}

}  // namespace

std::vector<std::string> run_files_in(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const char* name : {"config.toml", "metrics.jsonl", "metrics.csv", "model.bin", kRunIdFile, "checkpoints"}) {
    if (fs::exists(fs::path(dir) / name, ec)) found.push_back(name);
  }
  return found;
}

bool give_back_untrained_run_dir(const std::string& dir) {
  std::error_code ec;
  const fs::path d(dir);
  if (fs::exists(d / "model.bin", ec)) return false;
  if (fs::exists(d / "checkpoints", ec) && !fs::is_empty(d / "checkpoints", ec)) return false;
  if (fs::exists(d / "metrics.jsonl", ec)) {
    std::istringstream lines(binary::read_file((d / "metrics.jsonl").string(), "metrics", 1 << 20));
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty()) continue;
      try {
        const Json e = Json::parse(line, "metrics line");
        // What training writes; the start line, the failures that ended a job before its first step and the like
        // are not training.
        if (!e.has("event") || !e.at("event").is_string()) return false;
        const std::string& event = e.at("event").as_string();
        if (event == "step" || event == "epoch" || event == "summary") return false;
      } catch (const Error&) {
        return false;
      }
    }
  }
  for (const char* name : {kRunIdFile, "config.toml", "metrics.jsonl", "metrics.csv", "cluster.json", kJoinFile}) {
    fs::remove(d / name, ec);
  }
  fs::remove(d / "checkpoints", ec);  // only when empty
  return true;
}

std::string new_run_id() { return random_hex(8); }

void write_run_id(const std::string& run_dir, const std::string& run_id) {
  binary::write_file_atomically(run_dir + "/" + kRunIdFile, run_id + "\n", "run id");
}

std::string read_run_id(const std::string& run_dir) {
  const std::string path = run_dir + "/" + kRunIdFile;
  std::error_code ec;
  if (!fs::exists(path, ec)) return "";
  std::istringstream in(binary::read_file(path, "run id file", 4096));
  std::string id;
  if (!(in >> id)) return "";
  return id;
}

void keep_metrics_before(const std::string& run_dir, int64_t step) {
  for (const char* name : {"metrics.jsonl", "metrics.csv"}) {
    const fs::path from = fs::path(run_dir) / name;
    std::error_code ec;
    if (fs::exists(from, ec)) fs::rename(from, from.string() + ".before-step-" + std::to_string(step), ec);
  }
}

RunDirClaim::RunDirClaim(RunDirClaim&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

RunDirClaim& RunDirClaim::operator=(RunDirClaim&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

RunDirClaim::~RunDirClaim() { release(); }

void RunDirClaim::release() {
  if (fd_ >= 0) ::close(fd_);  // closing the file ends the lock; the file stays (removing it would race a new claim)
  fd_ = -1;
}

std::optional<RunDirClaim> RunDirClaim::try_take(const std::string& dir, std::string* holder) {
  make_directories(dir);
  const std::string path = dir + "/" + kClaimFile;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) throw Error("run directory " + dir + ": cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) {
      ::close(fd);
      throw Error("run directory " + dir + ": cannot lock " + path + ": " + std::strerror(err));
    }
    if (holder) {
      char buf[256] = {};
      const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      std::string who = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
      while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
      *holder = who.empty() ? "another process" : who;
    }
    ::close(fd);
    return std::nullopt;
  }
  const std::string who = "process " + std::to_string(::getpid()) + " on host " + host_name() + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, who.data(), who.size(), 0) != static_cast<ssize_t>(who.size())) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw Error("run directory " + dir + ": cannot write " + path + ": " + why);
  }
  return RunDirClaim(fd);
}

RunDirClaim RunDirClaim::take(const std::string& dir, const std::string& command) {
  std::string holder;
  std::optional<RunDirClaim> claim = try_take(dir, &holder);
  if (!claim) {
    throw Error(command + ": the run directory " + dir + " is in use by " + holder +
                " (another launch or training run); wait for it to end or choose another directory");
  }
  return std::move(*claim);
}

std::string without_trailing_slash(const std::string& dir) {
  std::string out = dir;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

NewRunDir claim_new_run_dir(const std::string& explicit_dir, const std::string& run_name, bool start_over,
                            const std::string& command, const std::string& resume_hint) {
  NewRunDir out;
  if (explicit_dir.empty()) {
    const std::string base = "runs/" + run_name;
    for (int n = 0;; ++n) {
      const std::string candidate = n == 0 ? base : base + "." + std::to_string(n);
      if (!run_files_in(candidate).empty()) continue;
      std::optional<RunDirClaim> claim = RunDirClaim::try_take(candidate);
      if (!claim || !run_files_in(candidate).empty()) continue;  // another run took it meanwhile
      out.path = candidate;
      out.claim = std::move(*claim);
      return out;
    }
  }
  out.path = without_trailing_slash(explicit_dir);
  out.claim = RunDirClaim::take(out.path, command);
  const std::vector<std::string> files = run_files_in(out.path);
  if (files.empty()) return out;
  const std::string aside = first_free_aside(out.path);
  if (!start_over) {
    throw Error(command + ": --run-dir " + out.path + " already holds a run (" + joined(files) +
                "): " + (resume_hint.empty() ? "choose another directory" : "continue it with " + resume_hint) +
                ", or add --start-over to move its files to " + aside + " and start a new run there");
  }
  std::error_code ec;
  fs::rename(out.path, aside, ec);
  if (ec) throw Error(command + ": --start-over: cannot move " + out.path + " to " + aside + ": " + ec.message());
  out.moved_to = aside;
  // The claim moved with the old run's files: claim the new directory (an Error if another process was quicker).
  out.claim = RunDirClaim::take(out.path, command);
  return out;
}

}  // namespace pshard
