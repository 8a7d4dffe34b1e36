#include "common/control/cluster_commands.h"

#include "common/control/control.capnp.h"

namespace pshard::cluster_client_detail {

void build_command(const Command& c, capnp::MallocMessageBuilder& b) {
  auto root = b.initRoot<control::ControlMessage>();
  switch (c.kind) {
    case Command::Kind::kBarrier: {
      auto enter = root.initBarrierEnter();
      enter.setName(c.name);
      enter.setVote(c.vote);
      break;
    }
    case Command::Kind::kReport: root.initReport().setJson(c.name); break;
    case Command::Kind::kFact: {
      auto fact = root.initJobFact();
      fact.setKind(static_cast<control::JobFact::Kind>(c.status));
      fact.setStep(c.step);
      fact.setPath(c.name);
      break;
    }
    case Command::Kind::kEpochEnter: {
      auto e = root.initEpochEnter();
      e.setEpoch(c.epoch);
      e.setStep(c.step);
      break;
    }
    case Command::Kind::kEpochJoined: root.initEpochJoined().setEpoch(c.epoch); break;
    case Command::Kind::kBatchClaim: {
      auto claim = root.initBatchClaim();
      claim.setEpoch(c.epoch);
      claim.setBatches(c.step);
      claim.setCount(static_cast<uint32_t>(c.status));
      break;
    }
    case Command::Kind::kStuck: {
      auto stuck = root.initStuck();
      auto ranks = stuck.initWorkers(static_cast<unsigned>(c.workers.size()));
      for (size_t i = 0; i < c.workers.size(); ++i) ranks.set(static_cast<unsigned>(i), c.workers[i]);
      stuck.setReason(c.name.substr(0, 1024));
      break;
    }
    case Command::Kind::kLeave: {
      auto leave = root.initLeave();
      leave.setExitStatus(c.status);
      leave.setReason(c.name.substr(0, 1024));
      leave.setStepsPushed(c.step);
      break;
    }
    case Command::Kind::kStop: break;
  }
}

}  // namespace pshard::cluster_client_detail
