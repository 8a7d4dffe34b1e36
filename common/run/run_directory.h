// A run directory belongs to one run: the run's id, the fresh-directory rule for new runs, and moving an old run
// aside (docs/OPERATIONS.md, "Run directories").
#pragma once

#include <string>
#include <vector>

namespace pshard {

// The file in a run directory that holds the run's id (16 hex digits), written when the run is created.
inline constexpr const char* kRunIdFile = "run-id";

// The files of a run that `dir` holds (config.toml, metrics.jsonl, metrics.csv, model.bin, run-id, checkpoints),
// by name; empty when `dir` is missing or holds none of them.
std::vector<std::string> run_files_in(const std::string& dir);

// A new run id: 64 random bits as 16 hex digits.
std::string new_run_id();
// RUN_DIR/run-id, written atomically.
void write_run_id(const std::string& run_dir, const std::string& run_id);
// The id in RUN_DIR/run-id; "" when the file is missing (a directory of an older pshard).
std::string read_run_id(const std::string& run_dir);

// The directory of a new run, never one that holds another run's files:
// - `explicit_dir` empty: the first of runs/<run_name>, runs/<run_name>.1, runs/<run_name>.2, ... that holds no run;
// - `explicit_dir` holding a run: with `start_over` its files are moved to EXPLICIT.old-N (the first free N) and the
//   directory is used (`moved_to`, when given, gets EXPLICIT.old-N); without, an Error that names `resume_hint` (how to
//   continue that run; "" when the command cannot) and --start-over.
// `command` names the command in the error ("pshard launch"). Returns the path as given (not made absolute).
//
//   std::string dir = choose_new_run_dir(o.run_dir, cfg.get_string("run.name"), o.start_over, "pshard train", "");
std::string choose_new_run_dir(const std::string& explicit_dir, const std::string& run_name, bool start_over,
                               const std::string& command, const std::string& resume_hint,
                               std::string* moved_to = nullptr);

}  // namespace pshard
