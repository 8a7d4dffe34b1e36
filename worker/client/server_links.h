// ServerLinks: a worker's shared memory with each server on its host (server/kv/shm_host.h is the servers' side), set
// up on first use and used by the KV client's threads: the payloads of float32 pushes go into this worker's push
// segment for that server (a transport::PushSlot per slice), the weights of float32 reads are copied out of the
// server's weights segment (a transport::WeightsSlot per slice); row requests' values go through a row segment
// (row_region).
//
//   ServerLinks links({rank, token, servers, transport::PayloadTransport::kAuto, &layout});
//   if (links.up(s)) {                                  // at each request until the link is up or given up
//     links.write_push(s, id, grad, n, deadline);       // then a push with sharedMemory and no payload frames
//     ...                                               // and, once the weights reply with sharedMemory arrived:
//     links.read_weights(s, id, out, n);
//   }
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/keys/slice_layout.h"
#include "common/transport/shm_channel.h"
#include "common/transport/shm_segment.h"
#include "worker/client/row_arena.h"

namespace pshard {

class ServerLinks {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    uint32_t rank = 0;                 // this worker's
    std::string job_token;             // asked for by a server's channel
    std::vector<std::string> servers;  // each server's endpoint, by rank: names its channel
    // cluster.transport: tcp never sets a link up; auto falls back to TCP for a server on another host; shm makes
    // that an error.
    transport::PayloadTransport transport = transport::PayloadTransport::kTcp;
    const SliceLayout* layout = nullptr;  // outlives the links
  };

  explicit ServerLinks(Options opt);

  // Whether payloads to server `s` go through shared memory. The first time (and while the server has no layout
  // yet, every 5 ms) it asks the server's channel for its weights segment, giving it this worker's push segment. No
  // channel: the server is on another host (auto: false from then on; shm: a pshard::Error) once it has answered a
  // request, else it may not listen yet and is asked again. Thread-safe.
  bool up(uint32_t s);
  // Server `s` has answered a request (it registers before it binds, so before that a missing channel says nothing).
  void heard_from(uint32_t s) { heard_[s].store(true); }

  // Copies slice `id`'s gradient into its push slot for server `s` (up) once the server has used the previous one.
  // Throws pshard::Error when that did not happen by `deadline`, or when abandon() was called meanwhile.
  void write_push(uint32_t s, uint32_t id, const float* values, size_t n, Clock::time_point deadline);
  // Copies slice `id`'s weights out of server `s`'s segment (up, after the reply that said they are there); false
  // when they changed during every attempt.
  bool read_weights(uint32_t s, uint32_t id, float* out, size_t n) const;
  // The client closes: a write_push waiting for a busy slot gives up.
  void abandon() { abandoned_.store(true); }

  // Embedding-table rows through shared memory: a region of `bytes` in this worker's row segment for server `s`
  // (kRowSegmentBytes, handed to the server's channel the first time; it needs no layout), where a rowPush's
  // gradients are written and a rowPull's rows come back. Null when the rows go over TCP: the server is on another
  // host or refused (auto; shm: a pshard::Error), cluster.transport = tcp, or the segment has no room for them now.
  // Thread-safe.
  std::shared_ptr<RowRegion> row_region(uint32_t s, size_t bytes);
  static constexpr size_t kRowSegmentBytes = size_t{64} << 20;

 private:
  // One server's link. kOn is final: the segments never change then.
  struct Link {
    enum class State { kOff, kUntried, kRetry, kOn };
    State state = State::kOff;
    Clock::time_point next_try;
    transport::SlotTable table;
    transport::SharedSegment push, weights;
  };
  // One server's row link: kOn is final.
  struct RowLink {
    Link::State state = Link::State::kOff;
    Clock::time_point next_try;
    transport::SharedSegment segment;
    std::unique_ptr<RowArena> arena;
  };
  std::string server_name(uint32_t s) const;
  bool connect(uint32_t s, Link& l);          // under mu_
  bool connect_rows(uint32_t s, RowLink& l);  // under mu_
  // A failed link: off under auto (false), a pshard::Error naming `why` under shm.
  bool give_up(uint32_t s, Link::State& state, const std::string& what, const std::string& why);

  Options opt_;
  std::mutex mu_;
  std::vector<Link> links_;         // mu_ until kOn
  std::vector<RowLink> row_links_;  // mu_ until kOn
  std::unique_ptr<std::atomic<bool>[]> heard_;
  std::atomic<bool> abandoned_{false};
};

}  // namespace pshard
