// The measured phases of a worker's training step and of a server's threads (docs/METRICS.md):
// the indices PhaseClock counts in, and their names in metrics.jsonl.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "common/util/json.h"

namespace pshard {

// Where a worker's training time goes. Every instant of an epoch's training loop is in exactly one.
enum class WorkerPhase : size_t {
  kData,      // waiting for the next batch (the prefetch thread did not have it ready)
  kForward,   // forward pass, minus waits for pulls
  kBackward,  // backward pass, minus waits for communication
  kCommWait,  // blocked on pushes and pulls
  kOther,     // the rest of the loop: bookkeeping, issuing requests, metrics, a local optimizer step
  kCount
};

// Where a server's threads' time goes (the socket thread and cluster.server_threads update threads,
// summed: the phases add up to threads x wall seconds).
enum class ServerPhase : size_t {
  kRecv,       // receiving, decoding and validating requests, handing their keys to the update threads
  kAggregate,  // taking a push into its slice (BSP: summing the workers' gradients), answering pulls
  kUpdate,     // the optimizer
  kReply,      // encoding and sending replies
  kIdle,       // waiting for a message or a task
  kOther,      // the rest: queues, locks, control events
  kCount
};

// Seconds per phase of one kind (WorkerPhase or ServerPhase), named as in metrics.jsonl.
template <class Phase>
struct PhaseSeconds {
  static constexpr size_t kCount = static_cast<size_t>(Phase::kCount);
  std::array<double, kCount> s{};

  double& operator[](Phase p) { return s[static_cast<size_t>(p)]; }
  double operator[](Phase p) const { return s[static_cast<size_t>(p)]; }
  double total() const;
  // after - before, phase by phase (two PhaseTotals::seconds() readings).
  static PhaseSeconds between(const std::vector<double>& before, const std::vector<double>& after);
  PhaseSeconds& operator+=(const PhaseSeconds& o);
  PhaseSeconds& operator/=(double n);

  // Sets one field per phase ("data_s": ...) on `j`.
  void set_fields(Json& j) const;
  // Strict: a missing or non-numeric field is a pshard::Error naming it (with `what` for context).
  static PhaseSeconds from_fields(const Json& j, const char* what);
  static const std::array<const char*, kCount>& names();  // "data_s", "forward_s", ...
};

using WorkerPhaseSeconds = PhaseSeconds<WorkerPhase>;
using ServerPhaseSeconds = PhaseSeconds<ServerPhase>;
template <>
const std::array<const char*, WorkerPhaseSeconds::kCount>& WorkerPhaseSeconds::names();
template <>
const std::array<const char*, ServerPhaseSeconds::kCount>& ServerPhaseSeconds::names();
extern template struct PhaseSeconds<WorkerPhase>;
extern template struct PhaseSeconds<ServerPhase>;

}  // namespace pshard
