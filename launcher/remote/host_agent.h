// `pshard host`: one host's share of a `pshard launch --hosts` job, started by the launcher over ssh.
#pragma once

#include <string>

namespace pshard::remote {

// Reads the host's plan (HostShare, one JSON line) from `in_fd`, writes the job's CurveZMQ keys (mode 0600) when the
// plan has them, runs the host's processes under a LocalJob (output prefixed with their names on stdout/stderr,
// which ssh carries back) and returns the host's exit status. When `in_fd` reaches EOF - the launcher stopped the
// job, died, or its ssh connection broke - every process gets SIGTERM, then SIGKILL after the plan's grace period,
// so nothing outlives the launcher. Throws pshard::Error for a plan it cannot use, before any process starts.
//
//   return run_host_agent("node2", STDIN_FILENO);
int run_host_agent(const std::string& name, int in_fd);

}  // namespace pshard::remote
