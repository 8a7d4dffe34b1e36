// Phase times: arithmetic and their fields in metrics.jsonl.
#include "common/metrics/phases.h"

#include <string>

#include "common/error.h"

namespace pshard {

template <>
const std::array<const char*, WorkerPhaseSeconds::kCount>& WorkerPhaseSeconds::names() {
  static const std::array<const char*, kCount> n = {"data_s", "forward_s", "backward_s", "comm_wait_s", "other_s"};
  return n;
}

template <>
const std::array<const char*, ServerPhaseSeconds::kCount>& ServerPhaseSeconds::names() {
  static const std::array<const char*, kCount> n = {"recv_s",  "aggregate_s", "update_s",
                                                    "reply_s", "idle_s",      "other_s"};
  return n;
}

template <class Phase>
double PhaseSeconds<Phase>::total() const {
  double t = 0;
  for (double v : s) t += v;
  return t;
}

template <class Phase>
PhaseSeconds<Phase> PhaseSeconds<Phase>::between(const std::vector<double>& before, const std::vector<double>& after) {
  if (before.size() != kCount || after.size() != kCount) throw Error("phase readings of the wrong size");
  PhaseSeconds p;
  for (size_t i = 0; i < kCount; ++i) p.s[i] = after[i] - before[i];
  return p;
}

template <class Phase>
PhaseSeconds<Phase>& PhaseSeconds<Phase>::operator+=(const PhaseSeconds& o) {
  for (size_t i = 0; i < kCount; ++i) s[i] += o.s[i];
  return *this;
}

template <class Phase>
PhaseSeconds<Phase>& PhaseSeconds<Phase>::operator/=(double n) {
  for (double& v : s) v /= n;
  return *this;
}

template <class Phase>
void PhaseSeconds<Phase>::set_fields(Json& j) const {
  for (size_t i = 0; i < kCount; ++i) j.set(names()[i], s[i]);
}

template <class Phase>
PhaseSeconds<Phase> PhaseSeconds<Phase>::from_fields(const Json& j, const char* what) {
  PhaseSeconds p;
  for (size_t i = 0; i < kCount; ++i) {
    try {
      p.s[i] = j.at(names()[i]).as_number();
    } catch (const Error& e) {
      throw Error(std::string(what) + ": field '" + names()[i] + "': " + e.what());
    }
  }
  return p;
}

template struct PhaseSeconds<WorkerPhase>;
template struct PhaseSeconds<ServerPhase>;

}  // namespace pshard
