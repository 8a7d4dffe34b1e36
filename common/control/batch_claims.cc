#include "common/control/batch_claims.h"

#include <capnp/message.h>

#include <algorithm>
#include <string>

#include "common/error.h"

namespace pshard::coordinator_detail {

BatchClaims::Grant BatchClaims::claim(int64_t epoch, int64_t batches, uint32_t count) {
  if (epoch < 1) throw Error("a batch claim for epoch " + std::to_string(epoch) + ": epochs count from 1");
  if (batches < 1) {
    throw Error("a batch claim for epoch " + std::to_string(epoch) + " says it holds " + std::to_string(batches) +
                " batches: at least 1");
  }
  if (count == 0 || count > kMaxClaim) {
    throw Error("a batch claim for epoch " + std::to_string(epoch) + " asks for " + std::to_string(count) +
                " batches: 1 to " + std::to_string(kMaxClaim));
  }
  auto [it, fresh] = epochs_.try_emplace(epoch, Epoch{batches, 0});
  Epoch& e = it->second;
  if (!fresh && e.batches != batches) {
    throw Error("a batch claim for epoch " + std::to_string(epoch) + " says it holds " + std::to_string(batches) +
                " batches, an earlier one " + std::to_string(e.batches) +
                ": the workers cut the data differently (their data.* and train.batch_size must agree)");
  }
  Grant g;
  g.first = e.next;
  g.count = static_cast<uint32_t>(std::min<int64_t>(count, e.batches - e.next));
  e.next += g.count;
  return g;
}

void BatchClaims::answer(const Peer& p, control::BatchClaim::Reader claim) {
  const Grant g = this->claim(claim.getEpoch(), claim.getBatches(), claim.getCount());
  capnp::MallocMessageBuilder b;
  auto granted = b.initRoot<control::ControlMessage>().initBatchesGranted();
  granted.setEpoch(claim.getEpoch());
  granted.setFirst(g.first);
  granted.setCount(g.count);
  if (outbox_) outbox_->send(p.id, b);
}

}  // namespace pshard::coordinator_detail
