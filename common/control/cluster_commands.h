// What a node's ClusterClient queues for its control thread to send, and the control message each becomes (internal).
#pragma once

#include <capnp/message.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pshard::cluster_client_detail {

struct Command {
  enum class Kind { kBarrier, kReport, kFact, kStuck, kEpochEnter, kEpochJoined, kBatchClaim, kLeave, kStop } kind;
  std::string name;               // barrier name, report text, a stuck report's or a leave's reason, a fact's path
  int status = 0;                 // kLeave: the exit status; kFact: its JobFact::Kind; kBatchClaim: the count
  std::vector<uint32_t> workers;  // kStuck
  int64_t epoch = 0;              // kEpochEnter, kEpochJoined, kBatchClaim
  int64_t step = 0;   // kEpochEnter, kFact; kLeave: the steps pushed (-1: not said); kBatchClaim: the epoch's batches
  bool vote = false;  // kBarrier: this node raises its flag
};

// The control message of a queued command into `b` (kStop sends none: `b` is left with an empty message).
void build_command(const Command& c, capnp::MallocMessageBuilder& b);

}  // namespace pshard::cluster_client_detail
