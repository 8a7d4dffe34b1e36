// A run directory belongs to one run: the run's id, the fresh-directory rule for new runs, and moving an old run
// aside (docs/OPERATIONS.md, "Run directories").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pshard {

// The file in a run directory that holds the run's id (16 hex digits), written when the run is created.
inline constexpr const char* kRunIdFile = "run-id";
// An elastic job's: the command line and environment of one more worker (`pshard join RUN_DIR`); 0600, it holds the
// job token.
inline constexpr const char* kJoinFile = "join.json";

// The files of a run that `dir` holds (config.toml, metrics.jsonl, metrics.csv, model.bin, run-id, checkpoints),
// by name; empty when `dir` is missing or holds none of them.
std::vector<std::string> run_files_in(const std::string& dir);

// A new run that trained nothing (refused before any process started, or by its processes before the first step: a
// batch larger than the data set, settings a server refuses) gives its directory back: the files the run wrote
// (run-id, config.toml, metrics.jsonl with the run's start alone, metrics.csv, cluster.json, join.json, an empty
// checkpoints folder) are removed, so that the corrected command may use the directory without --start-over. Returns
// false, touching nothing, when the run trained: model.bin, a checkpoint, or a step, epoch or summary line in
// metrics.jsonl (or a line it cannot read); the start line and the failures that ended the job are not training.
bool give_back_untrained_run_dir(const std::string& dir);

// A new run id: 64 random bits as 16 hex digits.
std::string new_run_id();
// RUN_DIR/run-id, written atomically.
void write_run_id(const std::string& run_dir, const std::string& run_id);
// The id in RUN_DIR/run-id; "" when the file is missing (a directory of an older pshard).
std::string read_run_id(const std::string& run_dir);

// A run that starts again at `step` (pshard launch --resume, a requeue, a restart after a server died): the
// coordinator writes a new metrics.jsonl, so what the run measured before is kept beside it as
// metrics.jsonl.before-step-K (and the csv).
void keep_metrics_before(const std::string& run_dir, int64_t step);

// A run directory held by one process: RUN_DIR/.claim is locked (flock) while this object lives and names the
// holder (pid and host). Another claim of the directory, from any process, is refused while this one holds it. The lock
// ends with the process however it ends (exit, crash, SIGKILL), so a dead launch leaves no claim to clean up.
//
//   RunDirClaim claim = RunDirClaim::take(run_dir, "pshard launch --resume");  // held until `claim` is destroyed
class RunDirClaim {
 public:
  RunDirClaim() = default;
  RunDirClaim(RunDirClaim&& other) noexcept;
  RunDirClaim& operator=(RunDirClaim&& other) noexcept;
  RunDirClaim(const RunDirClaim&) = delete;
  RunDirClaim& operator=(const RunDirClaim&) = delete;
  ~RunDirClaim();

  // Creates DIR if needed and claims it, or an Error "COMMAND: the run directory DIR is in use by process PID on
  // host H (another launch or training run); wait for it to end or choose another directory".
  static RunDirClaim take(const std::string& dir, const std::string& command);
  // The same, but nullopt (and `holder`, when given, describes the holder) when another process holds DIR.
  static std::optional<RunDirClaim> try_take(const std::string& dir, std::string* holder = nullptr);

  bool held() const { return fd_ >= 0; }
  void release();

 private:
  explicit RunDirClaim(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// DIR without trailing slashes ("runs/x/" -> "runs/x"; "/" stays "/"), so that DIR.old-N is a sibling of DIR.
std::string without_trailing_slash(const std::string& dir);

// The directory of a new run, never one that holds another run's files or that another process claimed (RunDirClaim):
// - `explicit_dir` empty: the first of runs/<run_name>, runs/<run_name>.1, runs/<run_name>.2, ... that holds no run and
//   is not claimed;
// - `explicit_dir` claimed by another process: an Error naming it and the holder;
// - `explicit_dir` holding a run: with `start_over` its files are moved to EXPLICIT.old-N (the first free N) and the
//   directory is used (`moved_to` gets EXPLICIT.old-N); without, an Error that names `resume_hint` (how to
//   continue that run; "" when the command cannot) and --start-over.
// `command` names the command in the error ("pshard launch"). The directory exists and is claimed on return; `path` is
// the path as given (less trailing slashes, not made absolute).
//
//   NewRunDir dir = claim_new_run_dir(o.run_dir, cfg.get_string("run.name"), o.start_over, "pshard train", "");
struct NewRunDir {
  std::string path;
  std::string moved_to;  // --start-over: where the old run went; "" when nothing moved
  RunDirClaim claim;
};
NewRunDir claim_new_run_dir(const std::string& explicit_dir, const std::string& run_name, bool start_over,
                            const std::string& command, const std::string& resume_hint);

}  // namespace pshard
