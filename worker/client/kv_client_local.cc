// KvClient::Impl on this host (kv_client_impl.h): the copier thread's copies into the push slots of the servers on
// this host (ServerLinks), and host aggregation (the leader's sums and pushes, the members' reads).
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/protocol/codec.h"
#include "common/transport/frames.h"
#include "worker/client/kv_client_impl.h"

namespace pshard {

using protocol::MessageType;
using Clock = std::chrono::steady_clock;

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
      links.write_push(p.server, id, sum.data(), n, p.deadline);
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
          links.write_push(p.server, id, src, layout.slice(id).length, p.deadline);
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
