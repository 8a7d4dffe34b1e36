// libFuzzer target: decoding one control-plane frame and reading it the way the coordinator and nodes do.
//
// Input: the frame's bytes. Decoding and every field read must either succeed or throw
// pshard::Error / kj::Exception, the two the receive loops of coordinator.cc and
// cluster_client.cc catch; anything else escaping (or a crash) is a bug.
#include <kj/exception.h>

#include <string>

#include "common/control/batch_claims.h"
#include "common/control/control_codec.h"
#include "common/error.h"
#include "common/metrics/epoch_report.h"
#include "common/util/json.h"
#include "tests/fuzz/fuzz_util.h"

using namespace pshard;
namespace cc = pshard::control_codec;

namespace {

// Reads every field of whichever message arrived, as the handlers do.
void read_all(control::ControlMessage::Reader root) {
  switch (root.which()) {
    case control::ControlMessage::REGISTER: {
      auto r = root.getRegister();
      NodeInfo n;
      n.host = r.getHost().cStr();
      n.pid = r.getPid();
      n.endpoint = r.getEndpoint().cStr();
      n.role = cc::from_wire(r.getRole());
      (void)r.getRequestedRank();
      (void)r.getLayoutFingerprint();
      (void)std::string(r.getJobToken().cStr());
      (void)cc::describe(n);
      break;
    }
    case control::ControlMessage::REGISTER_REFUSED:
      (void)std::string(root.getRegisterRefused().getReason().cStr());
      break;
    case control::ControlMessage::CLUSTER_MAP: {
      auto cm = root.getClusterMap();
      ClusterMap m;
      m.num_servers = cm.getNumServers();
      m.num_workers = cm.getNumWorkers();
      for (auto n : cm.getServers()) m.servers.push_back(cc::read_node(n));
      for (auto n : cm.getWorkers()) m.workers.push_back(cc::read_node(n));
      (void)cm.getYourRank();
      (void)cm.getYourRole();
      (void)cm.getHeartbeatIntervalMs();
      (void)cm.getHeartbeatTimeoutMs();
      m.min_workers = cm.getMinWorkers();
      (void)cm.getJoinsRunning();
      for (uint32_t r = 0; r < m.workers.size(); ++r) (void)m.vacant(r);
      break;
    }
    case control::ControlMessage::EPOCH_ENTER:
      (void)root.getEpochEnter().getEpoch();  // read as EpochPlans::enter does: compared and stored, never summed
      (void)root.getEpochEnter().getStep();
      break;
    case control::ControlMessage::EPOCH_PLAN: {
      auto ep = root.getEpochPlan();
      EpochPlan p;
      p.epoch = ep.getEpoch();
      p.first_step = ep.getFirstStep();
      p.join = ep.getJoin();
      for (uint32_t r : ep.getMembers()) p.members.push_back(r);
      break;
    }
    case control::ControlMessage::EPOCH_JOINED: (void)root.getEpochJoined().getEpoch(); break;
    case control::ControlMessage::BATCH_CLAIM: {
      // coordinator.cc on_batch_claim(): the claim goes to the job's BatchClaims, which grants it or throws an Error.
      coordinator_detail::BatchClaims claims;
      auto c = root.getBatchClaim();
      (void)claims.claim(c.getEpoch(), c.getBatches(), c.getCount());
      (void)claims.claim(c.getEpoch(), c.getBatches(), c.getCount());
      break;
    }
    case control::ControlMessage::BATCHES_GRANTED: {
      auto g = root.getBatchesGranted();
      (void)(g.getEpoch() + g.getFirst() + static_cast<int64_t>(g.getCount()));
      break;
    }
    case control::ControlMessage::BARRIER_ENTER:
      (void)(std::string(root.getBarrierEnter().getName().cStr()) + (root.getBarrierEnter().getVote() ? "!" : ""));
      break;
    case control::ControlMessage::BARRIER_RELEASE:
      (void)(std::string(root.getBarrierRelease().getName().cStr()) +
             (root.getBarrierRelease().getAnyVote() ? "!" : ""));
      break;
    case control::ControlMessage::HEARTBEAT: (void)root.getHeartbeat().getSeq(); break;
    case control::ControlMessage::NODE_DEAD: {
      NodeInfo n = cc::read_node(root.getNodeDead().getNode());
      (void)(cc::describe(n) + root.getNodeDead().getReason().cStr());
      (void)root.getNodeDead().getLeft();
      break;
    }
    case control::ControlMessage::WORKER_REGISTERED: {  // a server: the rank's pid for its shared-memory channel
      NodeInfo n = cc::read_node(root.getWorkerRegistered());
      (void)(cc::describe(n) + std::to_string(n.rank) + std::to_string(n.pid));
      break;
    }
    case control::ControlMessage::ABORT: {
      auto a = root.getAbort();
      (void)std::string(a.getReason().cStr());
      if (a.getHasDeadNode()) (void)cc::describe(cc::read_node(a.getDeadNode()));
      break;
    }
    case control::ControlMessage::SHUTDOWN: (void)std::string(root.getShutdown().getReason().cStr()); break;
    case control::ControlMessage::LEAVE: {
      auto l = root.getLeave();
      (void)l.getExitStatus();
      (void)std::string(l.getReason().cStr());
      (void)l.getStepsPushed();
      break;
    }
    case control::ControlMessage::REPORT: {
      // coordinator.cc on_report(): a JSON event; worker_epoch reports are parsed further.
      Json event = Json::parse(root.getReport().getJson().cStr(), "fuzz report");
      const std::string kind = event.at("event").as_string();
      if (kind == "worker_epoch") (void)WorkerEpochReport::from_json(event);
      break;
    }
    case control::ControlMessage::JOB_FACT: {
      // coordinator.cc on_fact(): any kind (an unknown one changes nothing), a step, a path cut to 4096 bytes.
      auto fact = root.getJobFact();
      (void)static_cast<int>(fact.getKind());
      (void)fact.getStep();
      (void)std::string(fact.getPath().cStr()).substr(0, 4096);
      break;
    }
    case control::ControlMessage::STUCK: {
      auto st = root.getStuck();
      for (uint32_t w : st.getWorkers()) (void)std::to_string(w);
      (void)std::string(st.getReason().cStr());
      break;
    }
    default: break;  // an unknown union member (a newer peer): logged and ignored
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zmq::message_t frame(data, size);
  try {
    cc::Decoded msg(frame, "fuzz peer");
    read_all(msg.root());
  } catch (const Error& e) {
    PSHARD_FUZZ_REQUIRE(e.what()[0] != '\0');
  } catch (const kj::Exception& e) {
    PSHARD_FUZZ_REQUIRE(e.getDescription().size() > 0);
  }
  return 0;
}
