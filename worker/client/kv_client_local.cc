// KvClient::Impl on this host (kv_client_impl.h): the shared-memory link with a server on this host, the copier
// thread's copies into the push slots, and host aggregation (the leader's sums and pushes, the members' reads).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/protocol/codec.h"
#include "common/transport/frames.h"
#include "common/transport/push_slot.h"
#include "common/transport/shm_channel.h"
#include "common/util/log.h"
#include "common/util/stream_copy.h"
#include "common/util/tsan.h"
#include "worker/client/kv_client_impl.h"

namespace pshard {

using protocol::MessageType;
using Clock = std::chrono::steady_clock;

bool KvClient::Impl::shared_memory_to(uint32_t s) {
  std::lock_guard<std::mutex> lock(links_mu);
  ShmLink& l = links[s];
  if (l.state == ShmLink::State::kOn) return true;
  if (l.state == ShmLink::State::kOff) return false;
  if (l.state == ShmLink::State::kRetry && Clock::now() < l.next_try) return false;
  const std::string who = "worker " + std::to_string(opt.rank) + ": " + server_name(s);
  auto give_up = [&](const std::string& why) {
    if (opt.transport == transport::PayloadTransport::kShm) {
      throw Error(who + ": cluster.transport = shm, but no shared memory with it: " + why);
    }
    PSHARD_LOG(kDebug) << who << ": payloads over TCP (" << why << ")";
    l.state = ShmLink::State::kOff;
    return false;
  };
  transport::SlotTable table(layout, s);
  if (table.bytes() == 0) return give_up("it holds no slices");
  if (!l.push.valid()) {
    l.push = transport::SharedSegment::create(
        "pshard worker " + std::to_string(opt.rank) + " push to server " + std::to_string(s), table.bytes());
  }
  const std::string request = "token " + opt.job_token + "\nrank " + std::to_string(opt.rank) + "\nfingerprint " +
                              std::to_string(layout.fingerprint()) + "\n";
  std::string reply, error;
  int fd = -1;
  if (!transport::shm_channel_call(transport::shm_channel_address(opt.job_token, opt.servers[s]), request, l.push.fd(),
                                   &reply, &fd, std::chrono::milliseconds(2000), &error)) {
    if (heard[s].load()) return give_up(error);
    l.state = ShmLink::State::kRetry;  // the server may not listen yet: ask again at the next request (a connect
    l.next_try = Clock::now();         // to an abstract name nobody holds fails at once)
    return false;
  }
  if (reply.rfind("retry", 0) == 0) {  // the server has no layout yet (worker 0's init is on its way)
    l.state = ShmLink::State::kRetry;
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
  l.state = ShmLink::State::kOn;
  PSHARD_LOG(kDebug) << who << ": payloads through shared memory (" << l.table.bytes() << " bytes each way)";
  return true;
}

void KvClient::Impl::write_push_slot(uint32_t s, uint32_t id, const float* values, size_t n,
                                     Clock::time_point deadline) {
  ShmLink& l = links[s];
  transport::PushSlot slot(l.table.head(l.push.data(), id));
  switch (slot.wait_free(deadline, &abandon_copies)) {
    case transport::PushSlot::Wait::kReady: break;
    case transport::PushSlot::Wait::kCancelled:
      throw Error("worker " + std::to_string(opt.rank) + ": the client closed");
    case transport::PushSlot::Wait::kTimedOut:
      throw Error("worker " + std::to_string(opt.rank) + ": " + server_name(s) + " has not used the previous push of " +
                  layout.describe(id) + " (its shared-memory slot is still busy after cluster.request_timeout_ms)");
  }
  slot.fill(values, n, 0);  // the server reads the values and the first non-finite index, not the tag
}

void KvClient::Impl::host_loop() {
  for (;;) {
    HostJob job;
    {
      std::unique_lock<std::mutex> lock(host_mu);
      host_cv.wait(lock, [&] { return host_stopping || !host_jobs.empty(); });
      if (host_stopping) {
        for (HostJob& j : host_jobs) {
          j.part.op->part_done("worker " + std::to_string(opt.rank) + ": the client closed before " + j.part.what);
        }
        host_jobs.clear();
        return;
      }
      job = std::move(host_jobs.front());
      host_jobs.pop_front();
    }
    try {
      if (job.part.publish_version > 0) {
        send_host_sum(job);
      } else {
        read_host_weights(job);
      }
    } catch (const Error& e) {
      job.part.op->part_done(e.what());
      wake.notify();
    }
  }
}

void KvClient::Impl::send_host_sum(HostJob& job) {
  Part& p = job.part;
  const size_t members = opt.host_ranks.size() - 1;
  p.frames.insert(p.frames.begin(), zmq::message_t());  // the header's place, filled once the members are in
  for (const auto& [id, own] : p.host_sums) {
    const size_t n = layout.slice(id).length;
    if (p.shared_memory) {
      std::vector<float> sum(n);
      group->sum_members(id, own, sum.data(), n, job.step, p.deadline);
      write_push_slot(p.server, id, sum.data(), n, p.deadline);
    } else {
      zmq::message_t f = pool->message(n * sizeof(float));
      group->sum_members(id, own, static_cast<float*>(f.data()), n, job.step, p.deadline);
      p.frames.push_back(std::move(f));
    }
    shm_bytes_recv += members * n * sizeof(float);
  }
  p.host_sums.clear();
  p.own_copy = std::vector<float>();
  job.header.stop = job.header.stop || job.step == group->stop_step();
  p.frames.front() = transport::copy_frame(protocol::encode_header(job.header));
  std::vector<Part> one;
  one.push_back(std::move(p));
  send_parts(one);
}

void KvClient::Impl::read_host_weights(HostJob& job) {
  Part& p = job.part;
  for (size_t k = 0; k < p.ids.size(); ++k) {
    const size_t n = p.keys[k].length;
    if (!p.dests.empty()) group->read_weights(p.ids[k], p.dests[k], n, job.step + 1, p.deadline);
    shm_bytes_recv += n * sizeof(float);
    fp32_bytes_recv += n * sizeof(float);
  }
  p.op->part_done("");
  wake.notify();  // a caller polling the sockets for this request looks at it again now, not after kScanPeriod
}

void KvClient::Impl::copy_loop() {
  for (;;) {
    std::pair<std::shared_ptr<Op>, std::vector<Part>> job;
    {
      std::unique_lock<std::mutex> lock(copy_mu);
      copy_cv.wait(lock, [&] { return copy_stopping || !copy_queue.empty(); });
      if (copy_queue.empty()) return;  // stopping, nothing left
      job = std::move(copy_queue.front());
      copy_queue.pop_front();
    }
    std::vector<Part> ready;
    for (Part& p : job.second) {
      try {
        for (const auto& [id, src] : p.slot_copies) {
          write_push_slot(p.server, id, src, layout.slice(id).length, p.deadline);
        }
        p.slot_copies.clear();
        ready.push_back(std::move(p));
      } catch (const Error& e) {
        p.op->part_done(e.what());
      }
    }
    send_parts(ready);
  }
}

void KvClient::Impl::publish_to_host(const Part& p) {
  if (p.publish_version == 0) return;
  for (size_t k = 0; k < p.keys.size(); ++k) {
    group->publish(p.ids[k], p.dests[k], p.keys[k].length, p.publish_version);
    shm_bytes_sent += p.keys[k].length * sizeof(float);
  }
}

}  // namespace pshard
