// The consistency mode of a job (cluster.mode): how pushes of different workers are combined.
#pragma once

#include <string>

namespace pshard {

// One policy per mode in server/consistency/{bsp,asp,ssp}.cc.
enum class Consistency {
  kBsp,  // "sync": the W pushes of step t are summed in rank order, the mean applied once; version -> t+1
  kAsp,  // "async": each push is applied on arrival; a pull returns the current weights
  kSsp,  // "ssp": as async, but a pull at clock c waits until the slowest live worker has pushed c - staleness steps
};
Consistency consistency_from_string(const std::string& mode);  // sync|async|ssp, else pshard::Error

}  // namespace pshard
