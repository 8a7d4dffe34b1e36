// ServerLinks: setting up a worker's shared memory with a server on its host, and its pushes and reads through it
// (server_links.h).
#include "worker/client/server_links.h"

#include <unistd.h>

#include <utility>

#include "common/error.h"
#include "common/transport/push_slot.h"
#include "common/transport/weights_slot.h"
#include "common/util/log.h"

namespace pshard {

ServerLinks::ServerLinks(Options opt)
    : opt_(std::move(opt)),
      links_(opt_.servers.size()),
      row_links_(opt_.servers.size()),
      heard_(std::make_unique<std::atomic<bool>[]>(opt_.servers.size())) {
  for (size_t s = 0; s < opt_.servers.size(); ++s) heard_[s] = false;
  if (opt_.transport != transport::PayloadTransport::kTcp) {
    for (Link& l : links_) l.state = Link::State::kUntried;
    for (RowLink& l : row_links_) l.state = Link::State::kUntried;
  }
}

std::string ServerLinks::server_name(uint32_t s) const {
  return "server " + std::to_string(s) + " (" + opt_.servers[s] + ")";
}

bool ServerLinks::up(uint32_t s) {
  std::lock_guard<std::mutex> lock(mu_);
  Link& l = links_[s];
  if (l.state == Link::State::kOn) return true;
  if (l.state == Link::State::kOff) return false;
  if (l.state == Link::State::kRetry && Clock::now() < l.next_try) return false;
  return connect(s, l);
}

bool ServerLinks::give_up(uint32_t s, Link::State& state, const std::string& what, const std::string& why) {
  const std::string who = "worker " + std::to_string(opt_.rank) + ": " + server_name(s);
  if (opt_.transport == transport::PayloadTransport::kShm) {
    throw Error(who + ": cluster.transport = shm, but no shared memory with it: " + why);
  }
  PSHARD_LOG(kDebug) << who << ": " << what << " over TCP (" << why << ")";
  state = Link::State::kOff;
  return false;
}

bool ServerLinks::connect(uint32_t s, Link& l) {
  const std::string who = "worker " + std::to_string(opt_.rank) + ": " + server_name(s);
  auto give_up = [&](const std::string& why) { return this->give_up(s, l.state, "payloads", why); };
  const SliceLayout& layout = *opt_.layout;
  transport::SlotTable table(layout, s);
  if (table.bytes() == 0) return give_up("it holds no slices");
  if (!l.push.valid()) {
    l.push = transport::SharedSegment::create(
        "pshard worker " + std::to_string(opt_.rank) + " push to server " + std::to_string(s), table.bytes());
  }
  const std::string request = "token " + opt_.job_token + "\nrank " + std::to_string(opt_.rank) + "\nfingerprint " +
                              std::to_string(layout.fingerprint()) + "\n";
  std::string reply, error;
  int fd = -1;
  if (!transport::shm_channel_call(transport::shm_channel_address(opt_.job_token, opt_.servers[s]), request,
                                   l.push.fd(), &reply, &fd, std::chrono::milliseconds(2000), &error)) {
    if (heard_[s].load()) return give_up(error);
    l.state = Link::State::kRetry;  // the server may not listen yet: ask again at the next request (a connect
    l.next_try = Clock::now();      // to an abstract name nobody holds fails at once)
    return false;
  }
  if (reply.rfind("retry", 0) == 0) {  // the server has no layout yet (worker 0's init is on its way)
    l.state = Link::State::kRetry;
    l.next_try = Clock::now() + std::chrono::milliseconds(5);
    return false;
  }
  if (reply.rfind("ok", 0) != 0 || fd < 0) {
    if (fd >= 0) ::close(fd);
    return give_up("it refused: " + reply.substr(reply.find('\n') + 1));
  }
  l.weights = transport::SharedSegment::attach(fd, table.bytes(), server_name(s) + "'s weights segment",
                                               transport::SharedSegment::Access::kReadOnly);
  l.table = std::move(table);
  l.state = Link::State::kOn;
  PSHARD_LOG(kDebug) << who << ": payloads through shared memory (" << l.table.bytes() << " bytes each way)";
  return true;
}

void ServerLinks::write_push(uint32_t s, uint32_t id, const float* values, size_t n, Clock::time_point deadline) {
  Link& l = links_[s];
  transport::PushSlot slot(l.table.head(l.push.data(), id));
  switch (slot.wait_free(deadline, &abandoned_)) {
    case transport::PushSlot::Wait::kReady: break;
    case transport::PushSlot::Wait::kCancelled:
      throw Error("worker " + std::to_string(opt_.rank) + ": the client closed");
    case transport::PushSlot::Wait::kTimedOut:
      throw Error("worker " + std::to_string(opt_.rank) + ": " + server_name(s) +
                  " has not used the previous push of " + opt_.layout->describe(id) +
                  " (its shared-memory slot is still busy after cluster.request_timeout_ms)");
  }
  slot.fill(values, n, 0);  // the server reads the values and the first non-finite index, not the tag
}

bool ServerLinks::read_weights(uint32_t s, uint32_t id, float* out, size_t n) const {
  const Link& l = links_[s];
  return transport::WeightsSlot(l.table.head(l.weights.data(), id)).read(out, n);
}

std::shared_ptr<RowRegion> ServerLinks::row_region(uint32_t s, size_t bytes) {
  RowLink& l = row_links_[s];
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (l.state == Link::State::kOff) return nullptr;
    if (l.state != Link::State::kOn) {
      if (l.state == Link::State::kRetry && Clock::now() < l.next_try) return nullptr;
      if (!connect_rows(s, l)) return nullptr;
    }
  }
  const int64_t offset = l.arena->allocate(bytes);
  if (offset < 0) return nullptr;
  auto region = std::make_shared<RowRegion>();
  region->arena = l.arena.get();
  region->offset = offset;
  region->data = l.segment.data() + offset;
  return region;
}

bool ServerLinks::connect_rows(uint32_t s, RowLink& l) {
  if (!l.segment.valid()) {
    l.segment = transport::SharedSegment::create(
        "pshard worker " + std::to_string(opt_.rank) + " rows for server " + std::to_string(s), kRowSegmentBytes);
  }
  const std::string request = "token " + opt_.job_token + "\nrank " + std::to_string(opt_.rank) + "\nrows " +
                              std::to_string(kRowSegmentBytes) + "\n";
  std::string reply, error;
  int fd = -1;
  if (!transport::shm_channel_call(transport::shm_channel_address(opt_.job_token, opt_.servers[s]), request,
                                   l.segment.fd(), &reply, &fd, std::chrono::milliseconds(2000), &error)) {
    if (heard_[s].load()) return give_up(s, l.state, "rows", error);
    l.state = Link::State::kRetry;
    l.next_try = Clock::now();
    return false;
  }
  if (fd >= 0) ::close(fd);            // the answer carries none
  if (reply.rfind("retry", 0) == 0) {  // a restarted worker whose registration has not reached the server yet
    l.state = Link::State::kRetry;
    l.next_try = Clock::now() + std::chrono::milliseconds(5);
    return false;
  }
  if (reply.rfind("ok", 0) != 0)
    return give_up(s, l.state, "rows", "it refused: " + reply.substr(reply.find('\n') + 1));
  l.arena = std::make_unique<RowArena>(kRowSegmentBytes);
  l.state = Link::State::kOn;
  PSHARD_LOG(kDebug) << "worker " << opt_.rank << ": " << server_name(s) << ": rows through shared memory ("
                     << kRowSegmentBytes << " bytes)";
  return true;
}

}  // namespace pshard
