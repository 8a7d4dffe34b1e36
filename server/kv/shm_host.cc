// A server's shared memory with the workers on its host (see shm_host.h).
#include "server/kv/shm_host.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/transport/peer_auth.h"
#include "common/transport/push_slot.h"
#include "common/transport/weights_slot.h"
#include "common/util/log.h"

namespace pshard {
namespace {

// "key value" lines of a channel request.
std::string field(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + " ", 0) == 0) return line.substr(key.size() + 1);
  }
  return "";
}

// Whether process `pid` exists (another user's counts: EPERM).
bool process_runs(int64_t pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

// The pid that process `pid` (as this process sees it) has in its own pid namespace, which is what it registered: a
// worker in a container's pid namespace that shares the host's network namespace has two. The last NSpid entry of
// /proc/PID/status; `pid` itself when that cannot be read.
int64_t pid_in_own_namespace(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("NSpid:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    int64_t last = pid;
    for (int64_t p; fields >> p;) last = p;
    return last;
  }
  return pid;
}

}  // namespace

ShmHost::ShmHost(uint32_t server_rank, uint32_t num_workers, std::string job_token, const std::string& endpoint,
                 std::vector<int64_t> worker_pids)
    : rank_(server_rank),
      num_workers_(num_workers),
      token_(std::move(job_token)),
      pushes_(num_workers),
      attached_by_(num_workers, 0),
      rows_(num_workers),
      rows_attached_by_(num_workers, 0),
      registered_(std::move(worker_pids)) {
  if (!registered_.empty()) registered_.resize(num_workers, 0);
  channel_ = std::make_unique<transport::ShmChannelServer>(
      transport::shm_channel_address(token_, endpoint), "server " + std::to_string(rank_),
      [this](const std::string& request, int fd, int* reply_fd, pid_t pid) {
        return answer(request, fd, reply_fd, pid);
      });
}

ShmHost::~ShmHost() { channel_.reset(); }

void ShmHost::install(const SliceLayout& layout) {
  transport::SlotTable table(layout, rank_);
  transport::SharedSegment weights;
  if (table.bytes() > 0) {
    weights = transport::SharedSegment::create("pshard server " + std::to_string(rank_) + " weights", table.bytes());
    weights.seal_against_other_writers();  // the workers it is handed to map it read-only; only this server writes
  }
  std::lock_guard<std::mutex> lock(mu_);
  table_ = std::move(table);
  weights_ = std::move(weights);
  fingerprint_ = layout.fingerprint();
  installed_ = true;
}

std::string ShmHost::answer(const std::string& request, int fd, int* reply_fd, pid_t peer_pid) {
  struct Closer {
    int fd;
    ~Closer() {
      if (fd >= 0) ::close(fd);
    }
  } close_unless_taken{fd};
  const std::string who = "server " + std::to_string(rank_);
  if (!transport::same_secret(field(request, "token"), token_)) {
    PSHARD_LOG(kWarn) << who << ": refused a shared-memory request with another job's token";
    return "refused\nthe job token is not this job's (a process of another job?)";
  }
  const std::string rank_text = field(request, "rank");
  char* end = nullptr;
  const unsigned long long rank = std::strtoull(rank_text.c_str(), &end, 10);
  if (rank_text.empty() || *end != '\0' || rank >= num_workers_) {
    return "refused\nworker rank '" + rank_text + "' is not one of this job's " + std::to_string(num_workers_);
  }
  if (fd < 0) return "refused\nthe request carries no segment";
  std::lock_guard<std::mutex> lock(mu_);
  const bool rows = !field(request, "rows").empty();
  if (rows) return attach_rows(static_cast<uint32_t>(rank), field(request, "rows"), peer_pid, close_unless_taken.fd);
  if (!installed_) return "retry\n" + who + " does not know the model's layout yet";
  if (table_.bytes() == 0) return "refused\n" + who + " holds no slices";
  if (field(request, "fingerprint") != std::to_string(fingerprint_)) {
    return "refused\nlayout fingerprint " + field(request, "fingerprint") + " differs from " + who + "'s " +
           std::to_string(fingerprint_);
  }
  const std::string what = "worker " + std::to_string(rank) + "'s push segment for " + who;
  const std::string not_yours =
      check_peer(static_cast<uint32_t>(rank), peer_pid, pushes_[rank] != nullptr, attached_by_[rank], what);
  if (!not_yours.empty()) return not_yours;
  try {
    pushes_[rank] =
        std::make_shared<transport::SharedSegment>(transport::SharedSegment::attach(fd, table_.bytes(), what));
  } catch (const Error& e) {
    close_unless_taken.fd = -1;  // attach() owns it now, and closed it
    PSHARD_LOG(kWarn) << who << ": " << e.what();
    return std::string("refused\n") + e.what();
  }
  close_unless_taken.fd = -1;
  attached_by_[rank] = peer_pid;
  ++attached_;
  *reply_fd = weights_.fd();
  return "ok\n" + std::to_string(table_.bytes());
}

std::string ShmHost::check_peer(uint32_t rank, pid_t peer_pid, bool attached, pid_t holder, const std::string& what) {
  const std::string who = "server " + std::to_string(rank_);
  if (!registered_.empty() && registered_[rank] != pid_in_own_namespace(peer_pid)) {
    const int64_t owner = registered_[rank];
    if (owner == 0 || !process_runs(owner)) {  // a restart or a joiner whose registration is on its way
      return "retry\n" + who + " has not heard of worker " + std::to_string(rank) + "'s registration as process " +
             std::to_string(peer_pid) + " yet";
    }
    PSHARD_LOG(kWarn) << who << ": refused process " << peer_pid << "'s " << what << ": the coordinator registered "
                      << "process " << owner << " for worker " << rank;
    return "refused\nprocess " + std::to_string(peer_pid) + " is not worker " + std::to_string(rank) +
           ": the coordinator registered process " + std::to_string(owner) + " for that rank";
  }
  // The same process may attach again (a reconnect); another one only once the first has ended (a restarted worker).
  if (attached && holder != 0 && holder != peer_pid && process_runs(holder)) {
    PSHARD_LOG(kWarn) << who << ": refused process " << peer_pid << "'s " << what << ": process " << holder
                      << " attached that worker's and still runs";
    return "refused\n" + what + " is attached by process " + std::to_string(holder) +
           ", which still runs: another process cannot take its place";
  }
  return "";
}

std::string ShmHost::attach_rows(uint32_t rank, const std::string& bytes_text, pid_t peer_pid, int& fd) {
  const std::string who = "server " + std::to_string(rank_);
  const std::string what = "worker " + std::to_string(rank) + "'s row segment for " + who;
  char* end = nullptr;
  const unsigned long long bytes = std::strtoull(bytes_text.c_str(), &end, 10);
  if (*end != '\0' || bytes == 0 || bytes > kMaxRowSegmentBytes) {
    return "refused\n" + what + ": size '" + bytes_text + "' is not 1 to " + std::to_string(kMaxRowSegmentBytes) +
           " bytes";
  }
  const std::string not_yours = check_peer(rank, peer_pid, rows_[rank] != nullptr, rows_attached_by_[rank], what);
  if (!not_yours.empty()) return not_yours;
  try {
    const int owned = fd;
    fd = -1;  // attach() owns it now, and closes it on failure
    rows_[rank] = std::make_shared<transport::SharedSegment>(transport::SharedSegment::attach(owned, bytes, what));
  } catch (const Error& e) {
    PSHARD_LOG(kWarn) << who << ": " << e.what();
    return std::string("refused\n") + e.what();
  }
  rows_attached_by_[rank] = peer_pid;
  return "ok\n" + std::to_string(bytes);
}

std::shared_ptr<transport::SharedSegment> ShmHost::push_segment(uint32_t rank) {
  std::lock_guard<std::mutex> lock(mu_);
  return rank < pushes_.size() ? pushes_[rank] : nullptr;
}

namespace {

// A push slot of a worker's segment, held by the payload frame that points into it.
struct PushSlotHold {
  std::shared_ptr<transport::SharedSegment> segment;
  transport::SlotHead* head;
};

// The server has used the gradient: the worker may write the slot again.
void release_push_slot(void*, void* hint) {
  auto* hold = static_cast<PushSlotHold*>(hint);
  transport::PushSlot(hold->head).free();
  delete hold;
}

}  // namespace

bool ShmHost::push_payloads(uint32_t rank, const std::vector<uint32_t>& slice_ids,
                            const std::vector<protocol::KeyRef>& keys,
                            std::vector<std::shared_ptr<zmq::message_t>>& payloads,
                            std::vector<uint64_t>& first_non_finite, std::string& why) {
  std::shared_ptr<transport::SharedSegment> segment = push_segment(rank);
  if (!segment) {
    why = "worker " + std::to_string(rank) + " has no push segment on this server";
    return false;
  }
  payloads.clear();
  first_non_finite.clear();
  for (size_t k = 0; k < slice_ids.size(); ++k) {
    transport::SlotHead* head = table().head(segment->data(), slice_ids[k]);
    if (head == nullptr) {
      why = "slice " + std::to_string(slice_ids[k]) + " has no slot in worker " + std::to_string(rank) +
            "'s push segment";
      payloads.clear();
      first_non_finite.clear();
      return false;
    }
    const size_t bytes = keys[k].length * sizeof(float);
    // Written with the values, before the worker sent the push.
    first_non_finite.push_back(transport::PushSlot(head).first_non_finite());
    payloads.push_back(std::make_shared<zmq::message_t>(transport::SlotTable::values(head), bytes, &release_push_slot,
                                                        new PushSlotHold{segment, head}));
  }
  return true;
}

std::shared_ptr<transport::SharedSegment> ShmHost::row_values(uint32_t rank, uint64_t offset, uint64_t bytes,
                                                              uint8_t** values, std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::shared_ptr<transport::SharedSegment> segment = rank < rows_.size() ? rows_[rank] : nullptr;
  if (!segment) {
    why = "worker " + std::to_string(rank) + " has no row segment on this server";
    return nullptr;
  }
  if (offset % alignof(float) != 0 || offset > segment->size() || bytes > segment->size() - offset) {
    why = "rows at offset " + std::to_string(offset) + " (" + std::to_string(bytes) + " bytes) are outside worker " +
          std::to_string(rank) + "'s row segment (" + std::to_string(segment->size()) + " bytes) or misaligned";
    return nullptr;
  }
  *values = segment->data() + offset;
  return segment;
}

transport::SlotHead* ShmHost::weights_slot(uint32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  return installed_ && weights_.data() != nullptr ? table_.head(weights_.data(), id) : nullptr;
}

void ShmHost::publish(uint32_t id, const float* values, size_t n, uint64_t generation) {
  transport::SlotHead* head = table_.head(weights_.data(), id);
  if (head == nullptr) return;
  transport::WeightsSlot slot(head);
  if (slot.generation() == generation) return;
  slot.write(values, n, generation);
}

void ShmHost::forget(uint32_t rank) {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank < pushes_.size()) {
    pushes_[rank].reset();
    attached_by_[rank] = 0;
    rows_[rank].reset();
    rows_attached_by_[rank] = 0;
  }
}

void ShmHost::registered(uint32_t rank, int64_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank >= registered_.size()) return;
  registered_[rank] = pid;
  if (attached_by_[rank] != pid) {  // the previous process's segment is no longer the rank's
    pushes_[rank].reset();
    attached_by_[rank] = 0;
  }
  if (rows_attached_by_[rank] != pid) {
    rows_[rank].reset();
    rows_attached_by_[rank] = 0;
  }
}

uint64_t ShmHost::attached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return attached_;
}

}  // namespace pshard
