// HostGroup: the leader's segment, the members' slots, and the waits between them.
#include "worker/client/host_group.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/reduce/rank_sum.h"
#include "common/transport/peer_auth.h"
#include "common/util/log.h"
#include "common/util/stream_copy.h"

namespace pshard {

using transport::SlotTable;

struct alignas(64) HostGroup::Head {
  std::atomic<int64_t> stop_step{-1};  // a member's request_stop(), for the leader's pushes
  std::atomic<int64_t> stop_at{0};     // the boundary the servers stopped the job at, for the members
};
static_assert(std::atomic<int64_t>::is_always_lock_free, "the group's head needs lock-free atomics");

namespace {

size_t head_bytes() { return (sizeof(std::atomic<int64_t>) * 2 + 63) / 64 * 64; }

std::string group_address(const std::string& token, uint32_t leader) {
  return transport::shm_channel_address(token, "host-" + std::to_string(leader));
}

}  // namespace

std::vector<uint32_t> host_ranks(const std::vector<std::string>& worker_localities, uint32_t rank) {
  std::vector<uint32_t> ranks;
  if (rank >= worker_localities.size()) return ranks;
  for (uint32_t r = 0; r < worker_localities.size(); ++r) {
    if (worker_localities[r] == worker_localities[rank]) ranks.push_back(r);
  }
  return ranks;
}

HostGroup::HostGroup(Options options) : opt_(std::move(options)) {
  if (opt_.layout == nullptr || opt_.ranks.size() < 2 ||
      std::find(opt_.ranks.begin(), opt_.ranks.end(), opt_.rank) == opt_.ranks.end() ||
      !std::is_sorted(opt_.ranks.begin(), opt_.ranks.end())) {
    throw Error("worker " + std::to_string(opt_.rank) +
                ": a host group needs a layout and two or more ranks, "
                "increasing, this one among them");
  }
  table_ = SlotTable::every_slice(*opt_.layout);
  lane_bytes_ = table_.bytes();
  if (!leader()) return;
  segment_ = transport::SharedSegment::create("pshard host of worker " + std::to_string(opt_.rank),
                                              head_bytes() + lane_bytes_ * opt_.ranks.size());
  new (segment_.data()) Head();
  attached_ = true;
  channel_ = std::make_unique<transport::ShmChannelServer>(
      group_address(opt_.job_token, opt_.rank), "worker " + std::to_string(opt_.rank) + " (its host's leader)",
      [this](const std::string& request, int fd, int* reply_fd, pid_t) { return answer(request, fd, reply_fd); });
}

HostGroup::~HostGroup() = default;

// The leader's channel: a member of this job (token), of this host's ranks, with this layout gets the segment.
std::string HostGroup::answer(const std::string& request, int fd, int* reply_fd) {
  if (fd >= 0) ::close(fd);
  std::istringstream in(request);
  std::string key, token;
  int64_t rank = -1;
  uint64_t fingerprint = 0;
  while (in >> key) {
    if (key == "token") in >> token;
    if (key == "rank") in >> rank;
    if (key == "fingerprint") in >> fingerprint;
  }
  if (!transport::same_secret(token, opt_.job_token)) return "refused\nthe job token differs";
  if (rank < 0 ||
      std::find(opt_.ranks.begin() + 1, opt_.ranks.end(), static_cast<uint32_t>(rank)) == opt_.ranks.end()) {
    return "refused\nworker " + std::to_string(rank) + " is not a member of this host's group";
  }
  if (fingerprint != opt_.layout->fingerprint()) return "refused\nthe layout fingerprint differs";
  *reply_fd = segment_.fd();
  return "ok\n";
}

void HostGroup::attach() {
  if (attached_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(attach_mu_);
  if (attached_.load(std::memory_order_relaxed)) return;
  const std::string who =
      "worker " + std::to_string(opt_.rank) + ": its host's leader, worker " + std::to_string(leader_rank());
  const std::string request = "token " + opt_.job_token + "\nrank " + std::to_string(opt_.rank) + "\nfingerprint " +
                              std::to_string(opt_.layout->fingerprint()) + "\n";
  const auto deadline = Clock::now() + opt_.timeout;
  std::string error;
  for (;;) {
    std::string reply;
    int fd = -1;
    if (transport::shm_channel_call(group_address(opt_.job_token, leader_rank()), request, -1, &reply, &fd,
                                    std::chrono::milliseconds(2000), &error)) {
      if (reply.rfind("ok", 0) != 0 || fd < 0) {
        if (fd >= 0) ::close(fd);
        throw Error(who + ", refused to share its segment: " + reply.substr(reply.find('\n') + 1));
      }
      segment_ = transport::SharedSegment::attach(fd, head_bytes() + lane_bytes_ * opt_.ranks.size(),
                                                  "the shared segment of worker " + std::to_string(leader_rank()));
      attached_.store(true, std::memory_order_release);
      PSHARD_LOG(kDebug) << "worker " << opt_.rank << ": gradients summed on this host by worker " << leader_rank();
      return;
    }
    if (Clock::now() > deadline) {
      throw Error(who + ", did not share its segment within cluster.request_timeout_ms (" + error + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the leader has not started its client yet
  }
}

HostGroup::Head* HostGroup::head() const { return reinterpret_cast<Head*>(segment_.data()); }
uint8_t* HostGroup::lane(size_t k) const { return segment_.data() + head_bytes() + k * lane_bytes_; }

size_t HostGroup::member_index(uint32_t rank) const {
  return static_cast<size_t>(std::find(opt_.ranks.begin(), opt_.ranks.end(), rank) - opt_.ranks.begin());
}

bool HostGroup::ready(transport::WaitResult w) const {
  if (w == transport::WaitResult::kCancelled)
    throw Error("worker " + std::to_string(opt_.rank) + ": the client closed");
  return w == transport::WaitResult::kReady;
}

void HostGroup::put_gradient(uint32_t id, const float* values, size_t n, int64_t step, Clock::time_point deadline) {
  attach();
  transport::PushSlot slot(table_.head(lane(member_index(opt_.rank)), id));
  if (!ready(slot.wait_free(deadline, &cancelled_))) {
    throw Error("worker " + std::to_string(opt_.rank) + ": its host's leader, worker " + std::to_string(leader_rank()) +
                ", has not used its gradient of " + opt_.layout->describe(id) + " for step " +
                std::to_string(slot.tag()) + " within cluster.request_timeout_ms");
  }
  slot.fill(values, n, static_cast<uint64_t>(step));  // the leader checks the step
}

void HostGroup::read_weights(uint32_t id, float* out, size_t n, int64_t version, Clock::time_point deadline) {
  attach();
  transport::WeightsSlot slot(table_.head(lane(0), id));
  if (!ready(slot.wait_for(static_cast<uint64_t>(version), deadline, &cancelled_))) {
    throw Error("worker " + std::to_string(opt_.rank) + ": its host's leader, worker " + std::to_string(leader_rank()) +
                ", did not bring the weights of " + opt_.layout->describe(id) + " for step " + std::to_string(version) +
                " within cluster.request_timeout_ms");
  }
  if (!slot.read(out, n)) {
    throw Error("worker " + std::to_string(opt_.rank) + ": the weights of " + opt_.layout->describe(id) +
                " changed during every read of its host's slot");
  }
}

void HostGroup::sum_members(uint32_t id, const float* own, float* sum, size_t n, int64_t step,
                            Clock::time_point deadline) {
  for (size_t k = 1; k < opt_.ranks.size(); ++k) {
    transport::PushSlot slot(table_.head(lane(k), id));
    if (!ready(slot.wait_full(deadline, &cancelled_))) {
      throw Error("worker " + std::to_string(opt_.rank) + ": worker " + std::to_string(opt_.ranks[k]) +
                  " (on this host) gave no gradient of " + opt_.layout->describe(id) + " for step " +
                  std::to_string(step) + " within cluster.request_timeout_ms");
    }
    const int64_t theirs = static_cast<int64_t>(slot.tag());
    if (theirs != step) {
      throw Error("worker " + std::to_string(opt_.rank) + ": worker " + std::to_string(opt_.ranks[k]) +
                  " (on this host) gave its gradient of " + opt_.layout->describe(id) + " for step " +
                  std::to_string(theirs) + " where step " + std::to_string(step) + " was expected");
    }
    const float* g = slot.values();
    // In rank order, as the server sums (common/reduce/rank_sum.h: its rounding contract).
    if (k == 1) {
      reduce::sum_start(own, g, sum, n);
    } else {
      reduce::sum_add(sum, g, n);
    }
    slot.free();
  }
}

void HostGroup::publish(uint32_t id, const float* values, size_t n, int64_t version) {
  transport::WeightsSlot(table_.head(lane(0), id)).write(values, n, static_cast<uint64_t>(version));
}

void HostGroup::request_stop(int64_t step) {
  attach();
  head()->stop_step.store(step, std::memory_order_release);
}
int64_t HostGroup::stop_step() {
  attach();
  return head()->stop_step.load(std::memory_order_acquire);
}
void HostGroup::set_stop_at(int64_t boundary) {
  attach();
  head()->stop_at.store(boundary, std::memory_order_release);
}
int64_t HostGroup::stop_at() {
  if (!attached_.load(std::memory_order_acquire)) return 0;  // not attached yet: nothing published
  return head()->stop_at.load(std::memory_order_acquire);
}

}  // namespace pshard
