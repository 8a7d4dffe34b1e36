// The one place a consistency mode becomes a policy.
#include "server/consistency/consistency_policy.h"

#include <cstring>

#include "common/error.h"
#include "server/consistency/asp.h"
#include "server/consistency/bsp.h"
#include "server/consistency/ssp.h"

namespace pshard {

std::unique_ptr<ConsistencyPolicy> make_consistency_policy(const ConsistencyParams& params, ConsistencySlice& slice) {
  switch (params.mode) {
    case Consistency::kBsp: return std::make_unique<BspPolicy>(slice, params.num_workers, params.backup);
    case Consistency::kAsp: return std::make_unique<AspPolicy>(slice);
    case Consistency::kSsp: return std::make_unique<SspPolicy>(slice, params.num_workers, params.staleness);
  }
  throw Error("no consistency policy for mode " + std::to_string(static_cast<int>(params.mode)));
}

const float* aligned_floats(const zmq::message_t& m, std::vector<float>& scratch) {
  if (reinterpret_cast<uintptr_t>(m.data()) % alignof(float) == 0) return static_cast<const float*>(m.data());
  scratch.resize(m.size() / sizeof(float));
  std::memcpy(scratch.data(), m.data(), m.size());
  return scratch.data();
}

}  // namespace pshard
