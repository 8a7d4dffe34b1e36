// HostAggregation (host_aggregation.h): the host thread's sums, pushes and reads.
#include "worker/client/host_aggregation.h"

#include <string>
#include <utility>

#include "common/error.h"
#include "common/transport/frames.h"
#include "common/util/signals.h"

namespace pshard {

HostAggregation::HostAggregation(HostGroup::Options group, Client client)
    : group_(std::make_unique<HostGroup>(std::move(group))), client_(std::move(client)) {
  thread_ = start_thread([this] { loop(); });
}

HostAggregation::~HostAggregation() { stop(); }

void HostAggregation::submit(std::vector<Job>& jobs) {
  if (jobs.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Job& j : jobs) jobs_.push_back(std::move(j));
  }
  cv_.notify_one();
}

void HostAggregation::stop() {
  if (!thread_.joinable()) return;
  group_->cancel();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HostAggregation::loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) {
        for (Job& j : jobs_) {
          j.part.op->part_done("worker " + std::to_string(client_.rank) + ": the client closed before " + j.part.what);
        }
        jobs_.clear();
        return;
      }
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    try {
      if (job.part.publish_version > 0) {
        send_sum(job);
      } else {
        read_weights(job);
      }
    } catch (const Error& e) {
      job.part.op->part_done(e.what());
      client_.poller->notify();
    }
  }
}

void HostAggregation::send_sum(Job& job) {
  Part& p = job.part;
  const size_t members = group_->ranks().size() - 1;
  p.frames.insert(p.frames.begin(), zmq::message_t());  // the header's place, filled once the members are in
  for (const auto& [id, own] : p.host_sums) {
    const size_t n = client_.layout->slice(id).length;
    if (p.shared_memory) {
      std::vector<float> sum(n);
      group_->sum_members(id, own, sum.data(), n, job.step, p.deadline);
      client_.links->write_push(p.server, id, sum.data(), n, p.deadline);
    } else {
      zmq::message_t f = client_.pool->message(n * sizeof(float));
      group_->sum_members(id, own, static_cast<float*>(f.data()), n, job.step, p.deadline);
      p.frames.push_back(std::move(f));
    }
    client_.counts->shm_bytes_recv += members * n * sizeof(float);
  }
  p.host_sums.clear();
  p.own_copy = std::vector<float>();
  job.header.stop = job.header.stop || job.step == group_->stop_step();
  p.frames.front() = transport::copy_frame(protocol::encode_header(job.header));
  std::vector<Part> one;
  one.push_back(std::move(p));
  client_.poller->send(one);
}

void HostAggregation::read_weights(Job& job) {
  Part& p = job.part;
  for (size_t k = 0; k < p.ids.size(); ++k) {
    const size_t n = p.keys[k].length;
    if (!p.dests.empty()) group_->read_weights(p.ids[k], p.dests[k], n, job.step + 1, p.deadline);
    client_.counts->shm_bytes_recv += n * sizeof(float);
    client_.counts->fp32_bytes_recv += n * sizeof(float);
  }
  p.op->part_done("");
  client_.poller->notify();  // a caller polling the sockets for this request looks at it again now, not after
                             // kScanPeriod
}

}  // namespace pshard
