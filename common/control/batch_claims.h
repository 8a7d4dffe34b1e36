// Async jobs with train.batch_assignment = dynamic: each epoch's batches handed out in order as the workers claim
// them (internal to the coordinator).
#pragma once

#include <cstdint>
#include <map>

#include "common/control/control.capnp.h"
#include "common/control/peers.h"

namespace pshard::coordinator_detail {

// A worker that trains faster claims more often and so trains more of each epoch's batches; every batch goes to
// exactly one worker. The epoch's batches are counted by the workers (their shuffled samples in batch-sized pieces),
// and every claim of an epoch must name the same count.
//
//   BatchClaims claims;
//   BatchClaims::Grant g = claims.claim(1, 937, 8);  // {0, 8}; the next claim of epoch 1 gets {8, 8}
class BatchClaims {
 public:
  struct Grant {
    int64_t first = 0;
    uint32_t count = 0;  // 0: the epoch's batches are all taken
  };
  BatchClaims() = default;
  explicit BatchClaims(Outbox& outbox) : outbox_(&outbox) {}
  // The most batches one claim may take.
  static constexpr uint32_t kMaxClaim = 4096;

  // The next at most `count` untaken batches of `epoch`, which holds `batches`. An Error naming the numbers when
  // epoch < 1, batches < 1, count is 0 or over kMaxClaim, or batches differs from an earlier claim's for the epoch.
  Grant claim(int64_t epoch, int64_t batches, uint32_t count);
  // The coordinator's side: worker `p`'s claim, answered through the outbox with batchesGranted. An Error when
  // claim() refuses it (nothing is sent then).
  void answer(const Peer& p, control::BatchClaim::Reader claim);

 private:
  Outbox* outbox_ = nullptr;
  struct Epoch {
    int64_t batches = 0;
    int64_t next = 0;  // the first batch not yet handed out
  };
  std::map<int64_t, Epoch> epochs_;
};

}  // namespace pshard::coordinator_detail
