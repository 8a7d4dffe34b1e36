// HostAggregation: a KV client's part in one push per host (cluster.host_aggregation; host_group.h is the shared
// segment). Its thread runs, in the order they were submitted (the order every worker of the host submits them in),
// the leader's sums (its own gradient plus the members', then the push for the whole host) and a member's reads of
// the weights the leader publishes.
//
//   HostAggregation host(group_options, {&layout, &links, pool, &poller, &counts, rank});
//   host.submit(jobs);                  // from the thread that built the parts
//   host.group().publish(...);          // the poller, as the leader's weights come back
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/keys/slice_layout.h"
#include "common/protocol/codec.h"
#include "common/transport/buffer_pool.h"
#include "worker/client/host_group.h"
#include "worker/client/request_parts.h"
#include "worker/client/request_poller.h"
#include "worker/client/server_links.h"

namespace pshard {

class HostAggregation {
 public:
  using Part = kv_client_detail::Part;

  // One part for the host thread: a leader's push for its host (part.publish_version > 0) or a member's read.
  struct Job {
    Part part;
    int64_t step = 0;
    // The leader's push header, encoded once the members' gradients are summed: a member asks to stop at a step
    // (request_stop) before it hands over that step's first gradient, after the leader may have submitted its own.
    protocol::Message header;
  };
  // What the host thread uses of its client; each outlives this object.
  struct Client {
    const SliceLayout* layout = nullptr;
    ServerLinks* links = nullptr;  // a leader's sums through shared memory
    std::shared_ptr<transport::BufferPool> pool;
    RequestPoller* poller = nullptr;  // sends a leader's push, hears of a member's read done
    kv_client_detail::TrafficCounts* counts = nullptr;
    uint32_t rank = 0;
  };

  HostAggregation(HostGroup::Options group, Client client);
  // stop(), if it was not called.
  ~HostAggregation();
  HostAggregation(const HostAggregation&) = delete;
  HostAggregation& operator=(const HostAggregation&) = delete;

  HostGroup& group() { return *group_; }
  const HostGroup& group() const { return *group_; }
  void submit(std::vector<Job>& jobs);
  // Cancels the group's waits and ends the thread; the jobs not yet run fail ("the client closed").
  void stop();

 private:
  void loop();
  // Leader: each slice's gradient summed with the members' (in rank order), then the push for the whole host.
  void send_sum(Job& job);
  // Member: the weights the leader publishes for step + 1.
  void read_weights(Job& job);

  std::unique_ptr<HostGroup> group_;
  const Client client_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;   // mu_
  bool stopping_ = false;  // mu_
  std::thread thread_;     // last: started once everything above exists
};

}  // namespace pshard
