// Rendezvous: registration checks, rank assignment and the cluster map.
#include "common/control/rendezvous.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>
#include <vector>

#include "common/control/control_codec.h"
#include "common/error.h"
#include "common/transport/peer_auth.h"
#include "common/util/log.h"

namespace pshard::coordinator_detail {
namespace {

namespace cc = control_codec;

std::string hex64(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

void send_refused(Outbox& outbox, const std::string& id, const std::string& reason) {
  capnp::MallocMessageBuilder b;
  b.initRoot<control::ControlMessage>().initRegisterRefused().setReason(reason);
  outbox.send(id, b);
}

}  // namespace

Rendezvous::Rendezvous(const Coordinator::Options& options, const std::string& endpoint, Peers& peers, Outbox& outbox)
    : opt_(options), endpoint_(endpoint), peers_(peers), outbox_(outbox) {}

std::optional<Peer> Rendezvous::read(const std::string& id, control::Register::Reader r) {
  Peer p;
  p.id = id;
  p.info.host = r.getHost().cStr();
  p.info.pid = r.getPid();
  p.info.locality = r.getLocality().cStr();
  p.info.endpoint = r.getEndpoint().cStr();
  p.requested_rank = r.getRequestedRank();
  p.fingerprint = r.getLayoutFingerprint();
  p.replaces_live = r.getReplacesLive();
  p.registered_at = p.last_seen = Clock::now();
  try {
    p.info.role = cc::from_wire(r.getRole());
  } catch (const Error& e) {
    send_refused(outbox_, id, e.what());
    return std::nullopt;
  }
  if (!transport::same_secret(std::string(r.getJobToken().cStr()), opt_.job_token)) {
    refuse(p, "job token mismatch: the coordinator at " + endpoint_ +
                  " runs another job (PSHARD_JOB_TOKEN differs); this process belongs to a different job or was "
                  "started by hand without the job's token");
    return std::nullopt;
  }
  if (p.info.role == NodeRole::kCoordinator) {
    refuse(p, "a coordinator cannot register as a node");
    return std::nullopt;
  }
  return p;
}

void Rendezvous::refuse(const Peer& p, const std::string& reason) {
  PSHARD_LOG(kWarn) << "refused registration of " << role_name(p.info.role) << " from host " << p.info.host << ", pid "
                    << p.info.pid << ": " << reason;
  send_refused(outbox_, p.id, reason);
}

std::optional<std::string> Rendezvous::admit(Peer p) {
  peers_.erase(p.id);  // a re-registration replaces the previous one
  const NodeRole role = p.info.role;
  const uint32_t want = expected(role);
  if (count_role(role) >= want) {
    refuse(p, "the job already has all " + std::to_string(want) + " " + role_name(role) + "s registered");
    return std::nullopt;
  }
  if (p.requested_rank >= 0) {
    if (p.requested_rank >= static_cast<int64_t>(want)) {
      refuse(p, "requested " + std::string(role_name(role)) + " rank " + std::to_string(p.requested_rank) +
                    " is out of range: the job has " + std::to_string(want) + " " + role_name(role) + "s");
      return std::nullopt;
    }
    for (const auto& [oid, o] : peers_) {
      if (reachable(o) && o.info.role == role && o.requested_rank == p.requested_rank) {
        refuse(p, std::string(role_name(role)) + " rank " + std::to_string(p.requested_rank) + " is already taken by " +
                      describe_unranked(o));
        return std::nullopt;
      }
    }
  }
  if (p.fingerprint != 0) {
    for (const auto& [oid, o] : peers_) {
      if (!reachable(o) || o.fingerprint == 0 || o.fingerprint == p.fingerprint) continue;
      std::string reason = "layout fingerprint mismatch: " + describe_unranked(p) + " computed " +
                           hex64(p.fingerprint) + " but " + describe_unranked(o) + " computed " + hex64(o.fingerprint) +
                           "; the nodes disagree on the slice assignment (different model, "
                           "cluster.slice_bytes or number of servers?)";
      // Not logged as a refusal: the coordinator logs it when it aborts the job for it.
      send_refused(outbox_, p.id, reason);
      return reason;
    }
  }
  PSHARD_LOG(kInfo) << "registered " << describe_unranked(p)
                    << (p.info.endpoint.empty() ? "" : " at " + p.info.endpoint);
  peers_[p.id] = p;
  return std::nullopt;
}

bool Rendezvous::complete() const {
  const uint32_t workers = count_role(NodeRole::kWorker);
  // An elastic job starts with its fewest workers; the others join at an epoch's start.
  return count_role(NodeRole::kServer) == opt_.num_servers &&
         (opt_.min_workers > 0 ? workers >= opt_.min_workers : workers == opt_.num_workers);
}

const ClusterMap& Rendezvous::hand_out_map(const MapHook& before_sending) {
  assign_ranks(NodeRole::kServer);
  assign_ranks(NodeRole::kWorker);
  ClusterMap m;
  m.num_servers = opt_.num_servers;
  m.num_workers = opt_.num_workers;
  m.min_workers = opt_.min_workers;
  m.servers.resize(opt_.num_servers);
  m.workers.resize(opt_.num_workers);
  for (uint32_t r = 0; r < opt_.num_workers; ++r) m.workers[r].rank = r;  // vacant (pid 0) unless a worker holds it
  for (auto& [id, p] : peers_) {
    if (!reachable(p)) continue;
    p.state = Peer::State::kLive;
    (p.info.role == NodeRole::kServer ? m.servers : m.workers)[p.info.rank] = p.info;
  }
  map_ = m;
  before_sending(map_);
  for (auto& [id, p] : peers_) {
    if (p.state == Peer::State::kLive) send_map(id, p.info, false);
  }
  return map_;
}

Peer* Rendezvous::replaced_by(const Peer& p) {
  for (auto& [oid, o] : peers_) {
    if (o.info.role == NodeRole::kWorker && o.state == Peer::State::kLive &&
        static_cast<int64_t>(o.info.rank) == p.requested_rank) {
      return &o;
    }
  }
  return nullptr;
}

// A rejoining worker takes over the rank of a dead worker: it gets the cluster map with itself in
// it and is live from now on (docs/OPERATIONS.md).
bool Rendezvous::rejoin(Peer p, const MapHook& before_sending) {
  std::set<uint32_t> dead, live;
  for (const auto& [oid, o] : peers_) {
    if (o.info.role != NodeRole::kWorker) continue;
    if (o.state == Peer::State::kDead) dead.insert(o.info.rank);
    if (o.state == Peer::State::kLive || o.state == Peer::State::kLeft) live.insert(o.info.rank);
    if (o.state == Peer::State::kLive && o.fingerprint != 0 && p.fingerprint != 0 && o.fingerprint != p.fingerprint) {
      refuse(p, "layout fingerprint mismatch with the running " + cc::describe(o.info) + ": " + hex64(p.fingerprint) +
                    " vs " + hex64(o.fingerprint));
      return false;
    }
  }
  if (opt_.min_workers > 0) {  // elastic: a rank no process held yet is free too
    for (uint32_t r = 0; r < map_.workers.size(); ++r) {
      if (map_.vacant(r)) dead.insert(r);
    }
  }
  for (uint32_t r : live) dead.erase(r);
  int64_t rank = -1;
  if (p.requested_rank >= 0) {
    if (dead.count(static_cast<uint32_t>(p.requested_rank))) rank = p.requested_rank;
  } else if (!dead.empty()) {
    rank = *dead.begin();
  }
  if (rank < 0) {
    if (opt_.min_workers > 0) {
      refuse(p, "the job already has its most workers (" + std::to_string(opt_.num_workers) +
                    (p.requested_rank >= 0 ? ", and worker rank " + std::to_string(p.requested_rank) + " is taken"
                                           : std::string()) +
                    "): a worker can join when one has left");
      return false;
    }
    refuse(p, "the job is already running and " +
                  (p.requested_rank >= 0 ? "worker rank " + std::to_string(p.requested_rank) + " is not dead"
                                         : std::string("no worker is dead")) +
                  ": a worker can only rejoin in place of a dead one");
    return false;
  }
  p.info.rank = static_cast<uint32_t>(rank);
  p.state = Peer::State::kLive;
  peers_.erase(p.id);
  peers_[p.id] = p;
  map_.workers.at(p.info.rank) = p.info;
  before_sending(map_);
  // The servers hear of the new process before it has the map, so that their shared-memory channels admit it.
  capnp::MallocMessageBuilder b;
  cc::fill_node(p.info, b.initRoot<control::ControlMessage>().initWorkerRegistered());
  outbox_.broadcast(peers_, b, [](const Peer& q) { return q.info.role == NodeRole::kServer && reachable(q); });
  send_map(p.id, p.info, opt_.min_workers > 0);
  if (opt_.min_workers > 0) {
    PSHARD_LOG(kInfo) << cc::describe(p.info) << " joined the job; it trains from the next epoch on";
  } else {
    PSHARD_LOG(kInfo) << cc::describe(p.info) << " rejoined the job in place of the dead worker " << rank;
  }
  return true;
}

std::string Rendezvous::missing_description() const {
  std::ostringstream out;
  for (NodeRole role : {NodeRole::kServer, NodeRole::kWorker}) {
    uint32_t have = count_role(role), want = expected(role);
    out << (role == NodeRole::kServer ? "" : "; ") << have << " of " << want << " " << role_name(role)
        << "s registered";
    if (have == want) continue;
    std::vector<bool> requested(want, false);
    uint32_t unrequested = 0;
    for (const auto& [id, p] : peers_) {
      if (p.info.role != role || !reachable(p)) continue;
      if (p.requested_rank >= 0) {
        requested[p.requested_rank] = true;
      } else {
        ++unrequested;
      }
    }
    std::vector<uint32_t> free_ranks;
    for (uint32_t r = 0; r < want; ++r) {
      if (!requested[r]) free_ranks.push_back(r);
    }
    // Unrequested registrations take the lowest free ranks; the rest are missing.
    out << " (missing " << role_name(role) << " rank" << (want - have > 1 ? "s" : "");
    for (size_t i = unrequested; i < free_ranks.size(); ++i) out << (i == unrequested ? " " : ", ") << free_ranks[i];
    out << ")";
  }
  return out.str();
}

uint32_t Rendezvous::count_role(NodeRole role) const {
  uint32_t n = 0;
  for (const auto& [id, p] : peers_) n += (p.info.role == role && reachable(p)) ? 1 : 0;
  return n;
}

uint32_t Rendezvous::expected(NodeRole role) const {
  return role == NodeRole::kServer ? opt_.num_servers : opt_.num_workers;
}

void Rendezvous::assign_ranks(NodeRole role) {
  std::vector<Peer*> mine;
  for (auto& [id, p] : peers_) {
    if (p.info.role == role && reachable(p)) mine.push_back(&p);
  }
  std::sort(mine.begin(), mine.end(), [](const Peer* a, const Peer* b) { return a->registered_at < b->registered_at; });
  std::vector<bool> taken(expected(role), false);
  for (Peer* p : mine) {
    if (p->requested_rank >= 0) {
      p->info.rank = static_cast<uint32_t>(p->requested_rank);
      taken[p->info.rank] = true;
    }
  }
  uint32_t next = 0;
  for (Peer* p : mine) {
    if (p->requested_rank >= 0) continue;
    while (taken[next]) ++next;
    p->info.rank = next;
    taken[next] = true;
  }
}

void Rendezvous::send_map(const std::string& id, const NodeInfo& to, bool joins_running) {
  capnp::MallocMessageBuilder b;
  auto cm = b.initRoot<control::ControlMessage>().initClusterMap();
  cm.setNumServers(map_.num_servers);
  cm.setNumWorkers(map_.num_workers);
  cm.setMinWorkers(map_.min_workers);
  cm.setJoinsRunning(joins_running);
  auto servers = cm.initServers(map_.num_servers);
  for (uint32_t i = 0; i < map_.num_servers; ++i) cc::fill_node(map_.servers[i], servers[i]);
  auto workers = cm.initWorkers(map_.num_workers);
  for (uint32_t i = 0; i < map_.num_workers; ++i) cc::fill_node(map_.workers[i], workers[i]);
  cm.setYourRole(cc::to_wire(to.role));
  cm.setYourRank(to.rank);
  cm.setHeartbeatIntervalMs(static_cast<uint32_t>(opt_.heartbeat_interval.count()));
  cm.setHeartbeatTimeoutMs(static_cast<uint32_t>(opt_.heartbeat_timeout.count()));
  outbox_.send(id, b);
}

}  // namespace pshard::coordinator_detail
