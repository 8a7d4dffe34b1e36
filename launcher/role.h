// What a process of a job is: the enum that launchers and reports use instead of parsing process names.
#pragma once

namespace pshard {

enum class Role {
  kCoordinator,
  kServer,
  kWorker,
  kOther,  // a helper process that is none of the three (tests, benchmark drivers)
};

// "coordinator", "server", "worker", "process".
inline const char* role_name(Role role) {
  switch (role) {
    case Role::kCoordinator: return "coordinator";
    case Role::kServer: return "server";
    case Role::kWorker: return "worker";
    case Role::kOther: break;
  }
  return "process";
}

}  // namespace pshard
