// Run directories: the run id file, the fresh-directory rule and --start-over (see run_directory.h).
#include "common/run/run_directory.h"

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/util/binary_file.h"
#include "common/util/host.h"

namespace pshard {
namespace {

namespace fs = std::filesystem;

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

std::string new_run_id() { return random_hex(8); }

void write_run_id(const std::string& run_dir, const std::string& run_id) {
  binary::write_file_atomically(run_dir + "/" + kRunIdFile, run_id + "\n", "run id");
}

std::string read_run_id(const std::string& run_dir) {
  std::ifstream in(run_dir + "/" + kRunIdFile);
  std::string id;
  if (!(in >> id)) return "";
  return id;
}

std::string choose_new_run_dir(const std::string& explicit_dir, const std::string& run_name, bool start_over,
                               const std::string& command, const std::string& resume_hint, std::string* moved_to) {
  if (explicit_dir.empty()) {
    const std::string base = "runs/" + run_name;
    if (run_files_in(base).empty()) return base;
    for (int n = 1;; ++n) {
      const std::string candidate = base + "." + std::to_string(n);
      if (run_files_in(candidate).empty()) return candidate;
    }
  }
  const std::vector<std::string> files = run_files_in(explicit_dir);
  if (files.empty()) return explicit_dir;
  const std::string aside = first_free_aside(explicit_dir);
  if (!start_over) {
    throw Error(command + ": --run-dir " + explicit_dir + " already holds a run (" + joined(files) +
                "): " + (resume_hint.empty() ? "choose another directory" : "continue it with " + resume_hint) +
                ", or add --start-over to move its files to " + aside + " and start a new run there");
  }
  std::error_code ec;
  fs::rename(explicit_dir, aside, ec);
  if (ec) throw Error(command + ": --start-over: cannot move " + explicit_dir + " to " + aside + ": " + ec.message());
  if (moved_to) *moved_to = aside;
  return explicit_dir;
}

}  // namespace pshard
