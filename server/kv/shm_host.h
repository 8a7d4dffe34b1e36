// A server's shared memory with the workers on its host: its weights segment, their push and row segments, and the
// channel through which they are exchanged.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/keys/slice_layout.h"
#include "common/protocol/codec.h"
#include "common/transport/shm_channel.h"
#include "common/transport/shm_segment.h"

namespace pshard {

// A worker on the server's host calls the channel (transport::shm_channel_address of the job token and the server's
// endpoint) with "token", "rank" and "fingerprint" lines and its push segment; the server checks the token, the
// rank and the layout, maps the segment only when its size is exactly what the layout needs, and answers "ok" with
// its weights segment. A second process of the job's user (which knows the token) cannot take a live worker's place:
//   - only the process the coordinator registered for the rank may attach (SO_PEERCRED's pid against the cluster
//     map's, which follows restarts and joins: registered()); while that process runs, any other is refused, and
//     while none runs (a restart whose registration is on its way) the answer is "retry";
//   - a rank whose segment another process attached, while that process still runs, is refused.
// A worker's row segment (embedding tables' rows) comes the same way with a "rows <bytes>" line instead of the
// fingerprint, under the same checks of the process, and needs no layout; the answer is "ok" alone.
// Until the server knows the layout (worker 0's init) it answers "retry" to a push segment. Then:
//   - a push with sharedMemory names slots of the sender's push segment: push_payloads() makes them the request's
//     payloads without copying, and marks each slot free again when the server has used it;
//   - a read with sharedMemory is answered through the weights segment: publish() copies a slice's weights into its
//     slot once per update of the slice (whatever the number of readers), and the reply carries no payload.
// Thread-safety: the channel runs on its own thread; install() and push_payloads() on the socket thread; publish() on
// the thread that owns the slice.
class ShmHost {
 public:
  // Listens on the channel; throws pshard::Error when it cannot. `worker_pids`: KvServerOptions::worker_pids.
  ShmHost(uint32_t server_rank, uint32_t num_workers, std::string job_token, const std::string& endpoint,
          std::vector<int64_t> worker_pids);
  ~ShmHost();

  // The layout is known (worker 0's init, or a restored checkpoint): creates the weights segment.
  void install(const SliceLayout& layout);

  // Worker `rank`'s push segment (null: it has none here). The caller keeps the pointer while it uses the segment.
  std::shared_ptr<transport::SharedSegment> push_segment(uint32_t rank);
  const transport::SlotTable& table() const { return table_; }
  // Worker `rank`'s push of slices `slice_ids` (keys[k].length floats each) as `payloads`: frames that point into
  // its push segment, each marking its slot free again when destroyed (the server has used the gradient), and
  // the first non-finite index the worker found in each (SlotHead::first_non_finite). False with `why` (and no
  // payloads) when the worker has no push segment here or a slice has no slot in it.
  bool push_payloads(uint32_t rank, const std::vector<uint32_t>& slice_ids, const std::vector<protocol::KeyRef>& keys,
                     std::vector<std::shared_ptr<zmq::message_t>>& payloads, std::vector<uint64_t>& first_non_finite,
                     std::string& why);

  // Row requests through shared memory (a rowPull's or rowPush's sharedMemory): `bytes` of float32 rows at `offset`
  // in worker `rank`'s row segment, which the worker handed over with a "rows <bytes>" line instead of the
  // fingerprint (the same checks of token, rank and process). The segment, held while the request uses it, and
  // `values` pointing there; null with `why` when the worker has no row segment here or the range is outside it.
  std::shared_ptr<transport::SharedSegment> row_values(uint32_t rank, uint64_t offset, uint64_t bytes, uint8_t** values,
                                                       std::string& why);
  static constexpr uint64_t kMaxRowSegmentBytes = uint64_t(1) << 32;

  // Global slice `id`'s slot in the weights segment, where the slice's weights can live (SliceWeights::home_in);
  // null when the slice is another server's or before install().
  transport::SlotHead* weights_slot(uint32_t id);
  // Copies `values` (n floats, update `generation` of the slice) into global slice `id`'s weights slot unless it
  // already holds that generation.
  void publish(uint32_t id, const float* values, size_t n, uint64_t generation);

  // A dead or restarted worker: its push segment is let go (a new one comes with its next channel call).
  void forget(uint32_t rank);
  // The coordinator registered process `pid` for worker `rank` while the job ran (a restart, a joiner): another
  // process's push segment for the rank is let go.
  void registered(uint32_t rank, int64_t pid);

  uint64_t attached() const;  // channel calls that attached a push segment

 private:
  std::string answer(const std::string& request, int fd, int* reply_fd, pid_t peer_pid);
  // Under mu_: "" when process `peer_pid` may attach `what` for worker `rank` (the registered process, and no other
  // live process holds it: `attached`, by `holder`), else the "retry" or "refused" answer.
  std::string check_peer(uint32_t rank, pid_t peer_pid, bool attached, pid_t holder, const std::string& what);
  // Under mu_: a "rows <bytes>" request; takes `fd` (sets it to -1).
  std::string attach_rows(uint32_t rank, const std::string& bytes_text, pid_t peer_pid, int& fd);

  uint32_t rank_;
  uint32_t num_workers_;
  std::string token_;
  mutable std::mutex mu_;  // guards the members below and the channel's view of them
  bool installed_ = false;
  uint64_t fingerprint_ = 0;
  transport::SlotTable table_;
  transport::SharedSegment weights_;
  std::vector<std::shared_ptr<transport::SharedSegment>> pushes_;  // per worker rank
  std::vector<pid_t> attached_by_;  // per worker rank: the process that attached pushes_[rank] (0: none)
  std::vector<std::shared_ptr<transport::SharedSegment>> rows_;  // per worker rank: its row segment
  std::vector<pid_t> rows_attached_by_;
  std::vector<int64_t> registered_;  // per worker rank: the coordinator's registered process (empty: no check)
  uint64_t attached_ = 0;
  std::unique_ptr<transport::ShmChannelServer> channel_;  // last: stops before the rest goes
};

}  // namespace pshard
