// The one exception type of pshard: a message a user can act on.
#pragma once

#include <stdexcept>
#include <string>

namespace pshard {

// Thrown for bad input (config, data file, command line, peer message) and
// for failures the caller can report. The message names what was wrong and
// where (file, key, offset, peer), e.g.
//   throw Error("config " + path + ": optimizer.lr must be > 0, got -1");
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// The exit status of a process (and of `pshard launch`/`pshard train`) whose work succeeded but
// whose records did not all reach the disk: a metrics line, metrics.csv, cluster.json or a
// checkpoint could not be written (e.g. the disk is full). The error was logged with the path.
constexpr int kExitRecordsIncomplete = 74;  // EX_IOERR of sysexits.h
// The job stopped at a checkpoint on SIGTERM (checkpoint.on_sigterm = checkpoint): `pshard launch --resume`, or a
// requeued SLURM job, continues it there. EX_TEMPFAIL of sysexits.h: "try again later".
constexpr int kExitStopped = 75;

}  // namespace pshard
