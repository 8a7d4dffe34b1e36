// pshard launch's word to the coordinator that a process it started has ended (control.capnp ProcessEnded): the
// coordinator applies the failure policy at once, where it would otherwise wait cluster.heartbeat_timeout_ms.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "common/control/cluster_map.h"
#include "common/transport/curve.h"

namespace pshard {

// A DEALER to the coordinator, authenticated as a process of the job (its token, or its CurveZMQ keys), used by one
// thread. Sends without waiting: a notice the coordinator never reads (it is gone) costs nothing, and the heartbeats
// remain the rule for processes no launcher watches.
//
//   ProcessNotifier notices(plan.coordinator, plan.job_token, keys);
//   notices.process_ended(NodeRole::kWorker, 1, pid, "was killed by signal 9 (SIGKILL)");
class ProcessNotifier {
 public:
  ProcessNotifier(const std::string& coordinator, std::string job_token, const transport::CurveKeys& curve);
  // `rank` empty: a process whose rank the coordinator chose (pshard join's worker), named by its pid on this host.
  void process_ended(NodeRole role, std::optional<uint32_t> rank, int64_t pid, const std::string& how);

 private:
  std::string token_;
  zmq::context_t ctx_{1};
  zmq::socket_t sock_;
};

}  // namespace pshard
