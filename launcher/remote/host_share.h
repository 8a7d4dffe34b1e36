// One host's share of a `pshard launch --hosts` job: the processes it runs, sent to `pshard host` on that host
// over ssh's stdin (with the job token and CurveZMQ keys, which never appear on a command line).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/transport/curve.h"
#include "launcher/local_job.h"
#include "launcher/remote/host_list.h"

namespace pshard::remote {

struct RemoteProcess {
  ChildSpec spec;  // argv and env as JobPlan made them (name, role, rank, ends_job, may_fail kept; stdin_text not sent)
  int64_t local_rank = -1;  // a worker's index among its host's workers: its CUDA_VISIBLE_DEVICES; -1: not a worker
  // cluster.restart_workers: when it fails, the host starts `restart` (argv and env) in its place, at most
  // max_restarts times (0: never).
  ChildSpec restart = ChildSpec();
  int max_restarts = 0;
};

struct HostShare {
  std::string host;           // the host's name, for messages
  std::string run_dir;        // created on the host when missing ("" = none)
  std::string key_dir;        // security.curve: where the host's processes read curve.keys ("" = plaintext)
  transport::CurveKeys keys;  // written to key_dir (mode 0600) unless the same keys are there (a shared filesystem)
  bool assign_gpus = false;   // train.device = cuda: spread the workers over the host's GPUs (gpu_assignment.h)
  int64_t grace_ms = 5000;    // SIGTERM -> SIGKILL delay of the host's processes
  // Where the host tells the coordinator that one of its processes ended (as pshard launch does for its own children),
  // authenticated by the job's token or its CurveZMQ keys.
  std::string coordinator;
  std::string job_token;
  bool drops_workers = false;  // an elastic job: a worker of this host that dies is dropped (LocalJob::Options)
  std::vector<RemoteProcess> processes;

  // One line of JSON (it holds secrets: it travels only on ssh's stdin).
  std::string to_json() const;
  // Throws pshard::Error naming the first missing or malformed field.
  static HostShare from_json(const std::string& line);
};

// The ssh command of the launcher: PSHARD_SSH split at spaces (e.g. "ssh -p 2222 -i /path/key"), "ssh" when unset or
// empty.
std::vector<std::string> ssh_command(const char* pshard_ssh);

// The child the launcher runs for `host`: `SSH -T -o BatchMode=yes TARGET exec REMOTE_PSHARD host --name NAME`, with
// `share` as its stdin. Its output lines are prefixed "[host NAME]".
ChildSpec ssh_host_process(const RemoteHost& host, const HostShare& share, const std::vector<std::string>& ssh,
                           const std::string& remote_pshard);

// What the launcher writes to a host's stdin (ChildSpec::sigterm_line) to pass a SIGTERM on to its processes
// (checkpoint.on_sigterm = checkpoint): ssh does not carry the ssh client's signals to the far side.
inline constexpr const char* kSigtermLine = "sigterm\n";

// `text` quoted for a POSIX shell: 'it'\''s'.
std::string shell_quote(const std::string& text);

}  // namespace pshard::remote
