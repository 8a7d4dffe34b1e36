// The workers of one host that combine their gradients before they leave it (cluster.host_aggregation): one shared
// segment, created by the host's lowest rank (the leader), in which every other worker of the host (a member) writes
// its gradients and from which it reads the weights the leader pulled for them all.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/keys/slice_layout.h"
#include "common/transport/push_slot.h"
#include "common/transport/shm_channel.h"
#include "common/transport/shm_segment.h"
#include "common/transport/weights_slot.h"

namespace pshard {

// The segment: a head (the job's stop step and stop boundary as the host knows them), then lanes that each hold a
// slot per slice of the layout (transport::SlotTable::every_slice): lane 0 the weights the leader publishes, lane k
// the gradients of the host's k-th member. Pages of slices that never go through the host (those of servers the
// workers reach without aggregation) are never touched and cost no memory.
//
// Per slice and step: each member's lane slot is a transport::PushSlot, which the member fills with its gradient (the
// step as its tag) once the leader has freed it; the leader waits for each member's slot in rank order, adds the
// gradient to its own and frees the slot, pushes the sum for the whole host (protocol `contributors`), and when the
// weights of step + 1 come back, writes them once into lane 0 (a seqlock, `generation` = step + 1) for every member to
// read. Waits are futexes on the slots' `busy` words (lane 0: a WeightsSlot, whose readers wait for a version), each
// bounded by the caller's deadline.
//
//   HostGroup group({rank, {2, 3}, token, &layout, timeout});
//   if (group.leader()) { group.sum_members(id, own, sum, n, step, deadline); push(sum); ...
//                         group.publish(id, weights, n, step + 1); }
//   else                { group.put_gradient(id, g, n, step, deadline); group.read_weights(id, w, n, step + 1, d); }
class HostGroup {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    uint32_t rank = 0;
    std::vector<uint32_t> ranks;  // the host's workers, increasing, this one among them
    std::string job_token;
    const SliceLayout* layout = nullptr;       // must outlive the group
    std::chrono::milliseconds timeout{60000};  // how long a member looks for the leader's segment
  };

  // The leader creates the segment and listens for its members; a member attaches on its first call.
  explicit HostGroup(Options options);
  ~HostGroup();
  HostGroup(const HostGroup&) = delete;
  HostGroup& operator=(const HostGroup&) = delete;

  bool leader() const { return opt_.rank == opt_.ranks.front(); }
  uint32_t leader_rank() const { return opt_.ranks.front(); }
  const std::vector<uint32_t>& ranks() const { return opt_.ranks; }

  // Member: this worker's gradient of slice `id` for `step` (n floats), once the leader has used the previous one.
  // Throws pshard::Error naming the leader after `deadline`.
  void put_gradient(uint32_t id, const float* values, size_t n, int64_t step, Clock::time_point deadline);
  // Member: the weights of slice `id` at `version` (a step boundary) into `out`, once the leader has published them.
  void read_weights(uint32_t id, float* out, size_t n, int64_t version, Clock::time_point deadline);

  // Leader: `sum` = its own gradient `own` of slice `id` for `step` plus every member's, added in rank order; frees
  // the members' slots. Throws pshard::Error naming the member that gave nothing by `deadline`.
  void sum_members(uint32_t id, const float* own, float* sum, size_t n, int64_t step, Clock::time_point deadline);
  // Leader: the weights of slice `id` at `version`, for the members.
  void publish(uint32_t id, const float* values, size_t n, int64_t version);

  // Every wait of this object ends now with an Error (the client closes).
  void cancel() { cancelled_ = true; }

  // The job's stop (checkpoint.on_sigterm) across the host: a member's request reaches the servers with the
  // leader's pushes, and the boundary the servers answered reaches the members with the weights.
  void request_stop(int64_t step);
  int64_t stop_step();
  void set_stop_at(int64_t boundary);
  int64_t stop_at();

 private:
  struct Head;
  void attach();  // member: maps the leader's segment (throws after opt_.timeout)
  // A slot's wait (PushSlot, WeightsSlot) ended: true when the slot is ready, false when it timed out; throws when
  // cancel() ended it.
  bool ready(transport::WaitResult w) const;
  Head* head() const;
  uint8_t* lane(size_t k) const;
  size_t member_index(uint32_t rank) const;  // 1-based lane of a member
  std::string answer(const std::string& request, int fd, int* reply_fd);

  Options opt_;
  transport::SlotTable table_;
  size_t lane_bytes_ = 0;
  std::mutex attach_mu_;               // a member's first calls may come from several threads
  std::atomic<bool> attached_{false};  // segment_ is mapped (the leader's from the start)
  std::atomic<bool> cancelled_{false};
  transport::SharedSegment segment_;
  std::unique_ptr<transport::ShmChannelServer> channel_;  // leader: hands the segment to the members
};

// Thread-safety: put_gradient, read_weights, add_members and publish may run on different threads for different
// slices; each slice's slot has one writer at a time by construction.

// The workers of this job on `rank`'s host (equal localities), in increasing rank order.
std::vector<uint32_t> host_ranks(const std::vector<std::string>& worker_localities, uint32_t rank);

}  // namespace pshard
