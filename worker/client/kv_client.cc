// KvClient: request building on the calling thread; the DEALER sockets are used by one thread at a time: a caller
// that finds them free, or else the I/O thread.
#include "worker/client/kv_client.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <zmq.hpp>

#include "common/compression/push_encoder.h"
#include "common/config/config.h"
#include "common/error.h"
#include "common/protocol/codec.h"
#include "common/transport/bounds.h"
#include "common/transport/buffer_pool.h"
#include "common/transport/frames.h"
#include "common/transport/peer_auth.h"
#include "common/transport/shm_channel.h"
#include "common/transport/shm_segment.h"
#include "common/transport/wakeup.h"
#include "common/util/log.h"
#include "common/util/stream_copy.h"
#include "common/util/tsan.h"
#include "worker/client/host_group.h"

namespace pshard {

using protocol::MessageType;
using Clock = std::chrono::steady_clock;

namespace {

// One user-visible request (a handle): done when every per-server part is done.
struct Op {
  std::mutex mu;
  std::condition_variable cv;
  int remaining = 0;                                           // per-server parts not yet answered
  int borrowed = 0;                                            // zero-copy frames ZeroMQ still holds
  int64_t max_step = -1;                                       // ping: the highest step a pong reported
  std::string error;                                           // first failure
  protocol::ErrorCode error_code = protocol::ErrorCode::NONE;  // its code, when it was a server's error reply

  void part_done(const std::string& failure, protocol::ErrorCode code = protocol::ErrorCode::NONE) {
    std::lock_guard<std::mutex> lock(mu);
    if (!failure.empty() && error.empty()) {
      error = failure;
      error_code = code;
    }
    --remaining;
    cv.notify_all();
  }
};

// One message to one server, and what to do with its reply.
struct Part {
  uint32_t server = 0;
  uint64_t request_id = 0;
  MessageType type = MessageType::INVALID;
  std::string what;  // "pull of fc1.weight (3 slices)"
  std::vector<protocol::KeyRef> keys;
  std::vector<uint32_t> ids;   // global slice id of each key
  bool shared_memory = false;  // payloads and weights through the server's shared memory (ShmLink)
  // zpush through shared memory: gradients still to copy into the push slots (by the copier thread, before it sends
  // the part), as (slice id, source).
  std::vector<std::pair<uint32_t, const float*>> slot_copies;
  std::vector<float*> dests;  // pull/pushPull: where each key's weights go
  // Host aggregation (HostGroup), the leader's push for its host: each slice's own gradient, to be summed with the
  // members' before the part is sent; the weights of step + 1 that come back are published to the members.
  std::vector<std::pair<uint32_t, const float*>> host_sums;
  std::vector<float> own_copy;  // push(): this part's slices of the caller's gradient, copied (the caller may reuse
                                // its buffer), one after the other
  std::vector<float> scratch;   // a push without a pull: where the weights for the members land
  int64_t publish_version = 0;  // > 0: publish the reply's weights to the host at this version
  std::vector<zmq::message_t> frames;
  std::shared_ptr<Op> op;
  Clock::time_point deadline;
  Clock::time_point sent_at;
  int64_t stall_warnings = 0;  // how many times it was logged as waiting
};

// On ZeroMQ's I/O thread once the frame is sent (see submit() for the TSan annotation).
void release_borrowed(void*, void* hint) {
  tsan_acquire(hint);
  auto* op = static_cast<std::shared_ptr<Op>*>(hint);
  {
    std::lock_guard<std::mutex> lock((*op)->mu);
    --(*op)->borrowed;
  }
  (*op)->cv.notify_all();
  delete op;
}

}  // namespace

// The shared memory a worker has with one server on its host: its push segment for that server's slices and the
// server's weights segment (server/kv/shm_host.h has the exchange). kOn is final; the segments never change then.
struct ShmLink {
  enum class State { kOff, kUntried, kRetry, kOn };
  State state = State::kOff;
  Clock::time_point next_try;
  transport::SlotTable table;
  transport::SharedSegment push, weights;
};

struct KvClient::Impl {
  KvClientOptions opt;
  SliceLayout layout;
  std::shared_ptr<transport::BufferPool> pool = transport::BufferPool::create(size_t{1} << 30);
  zmq::context_t ctx{1};
  transport::Wakeup wake;  // the poller's: parts were queued for it (or the client stops)
  std::thread io;
  std::atomic<bool> stopping{false};

  // The sockets have one user at a time, the poller: a caller that found them free (it sends its request itself, and
  // a caller about to block in wait() receives the replies itself) or else the I/O thread, which takes them over when
  // requests are in flight that no caller is waiting on. Each thread hand-off costs a scheduler wake-up (~15-20 us on
  // an idle VM), so a lone request-and-wait goes caller -> socket -> caller with no thread of ours in between.
  // Ownership changes under io_mu; the mutex also orders the sockets' use across threads, as ZeroMQ requires.
  enum class Poller { kNone, kCaller, kIoThread };
  std::mutex io_mu;
  std::condition_variable io_cv;       // the I/O thread waits on it for sockets with nobody polling them
  Poller poller = Poller::kNone;       // io_mu
  std::deque<Part> queue;              // io_mu: parts for the poller to send (submitted while the sockets were busy)
  bool unattended = false;             // io_mu: requests in flight and nobody polls (set when the poller lets go)
  int parked = 0;                      // io_mu: callers blocked on a request's completion while another thread polls
  std::vector<zmq::socket_t> sockets;  // the poller's

  std::mutex ops_mu;
  std::unordered_map<Handle, std::shared_ptr<Op>> ops;
  std::atomic<uint64_t> next_handle{1};
  std::atomic<uint64_t> next_request{1};
  std::atomic<int64_t> checkpoint_step{-1};
  std::atomic<int64_t> stop_step{-1};  // request_stop()
  std::atomic<int64_t> stop_at{0};     // from the servers' replies (stopAt): the step boundary the job stops at
  compression::PushEncoder encoder;
  std::atomic<uint64_t> bytes_sent{0}, bytes_recv{0}, fp32_bytes_sent{0}, fp32_bytes_recv{0};
  std::atomic<uint64_t> shm_bytes_sent{0}, shm_bytes_recv{0};
  std::mutex links_mu;
  std::vector<ShmLink> links;  // per server (links_mu until kOn)
  // Per server: it has answered a request. A server registers before it binds, so until then a channel that is
  // not there yet does not mean that the server is on another host.
  std::unique_ptr<std::atomic<bool>[]> heard;

  // zpush's copies of slices up to this size into the push slots are made on the caller's thread.
  static constexpr size_t kCopierMinBytes = 64u << 10;
  // The copier: zpush's copies into the push slots run on this thread, not on the caller's, as the kernel's copy of a
  // TCP payload runs on ZeroMQ's I/O thread: a trainer's backward goes on while its gradients are copied.
  std::mutex copy_mu;
  std::condition_variable copy_cv;
  std::deque<std::pair<std::shared_ptr<Op>, std::vector<Part>>> copy_queue;  // copy_mu
  bool copy_stopping = false;                                                // copy_mu
  std::atomic<bool> abandon_copies{false};  // the client closes: a copy waiting for a busy slot gives up
  std::thread copier;

  // Host aggregation (opt.host_ranks): the host's shared segment, and the thread that waits on it: the leader's sums
  // (its own gradient plus the members', then the push) and a member's reads of the weights the leader publishes.
  // Jobs run in the order they were submitted, which is the order every worker of the host submits them in.
  struct HostJob {
    Part part;
    int64_t step = 0;
    // The leader's push header, encoded once the members' gradients are summed: a member asks to stop at a step
    // (request_stop) before it hands over that step's first gradient, after the leader may have submitted its own.
    protocol::Message header;
  };
  std::unique_ptr<HostGroup> group;
  std::mutex host_mu;
  std::condition_variable host_cv;
  std::deque<HostJob> host_jobs;  // host_mu
  bool host_stopping = false;     // host_mu
  std::thread host_thread;

  explicit Impl(KvClientOptions o)
      : opt(std::move(o)),
        layout(opt.tensors, opt.slice_bytes, static_cast<uint32_t>(opt.servers.size())),
        encoder(opt.compression, opt.rank, layout.slices().size()) {
    for (size_t s = 0; s < opt.servers.size(); ++s) {
      zmq::socket_t sock(ctx, zmq::socket_type::dealer);
      sock.set(zmq::sockopt::linger, 0);
      sock.set(zmq::sockopt::sndhwm, 0);
      sock.set(zmq::sockopt::rcvhwm, 0);
      transport::bound_client(sock, transport::data_max_frame_bytes(opt.slice_bytes));
      transport::apply_client_auth(sock, opt.curve, opt.job_token);
      try {
        sock.connect(opt.servers[s]);
      } catch (const zmq::error_t& e) {
        throw Error("worker " + std::to_string(opt.rank) + ": cannot connect to server " + std::to_string(s) + " at '" +
                    opt.servers[s] + "': " + e.what());
      }
      sockets.push_back(std::move(sock));
    }
    links.resize(opt.servers.size());
    heard = std::make_unique<std::atomic<bool>[]>(opt.servers.size());
    for (size_t s = 0; s < opt.servers.size(); ++s) heard[s] = false;
    if (opt.transport != transport::PayloadTransport::kTcp) {
      for (ShmLink& l : links) l.state = ShmLink::State::kUntried;
    }
    if (opt.host_ranks.size() >= 2) {
      group = std::make_unique<HostGroup>(
          HostGroup::Options{opt.rank, opt.host_ranks, opt.job_token, &layout, opt.request_timeout});
      host_thread = std::thread([this] { host_loop(); });
    }
    io = std::thread([this] { io_loop(); });
    copier = std::thread([this] { copy_loop(); });
  }

  ~Impl() {
    if (group) {
      group->cancel();
      {
        std::lock_guard<std::mutex> lock(host_mu);
        host_stopping = true;
      }
      host_cv.notify_all();
      if (host_thread.joinable()) host_thread.join();
    }
    abandon_copies = true;
    {
      std::lock_guard<std::mutex> lock(copy_mu);
      copy_stopping = true;
    }
    copy_cv.notify_all();
    if (copier.joinable()) copier.join();
    {
      std::lock_guard<std::mutex> lock(io_mu);
      stopping = true;
    }
    io_cv.notify_all();
    wake.notify();
    if (io.joinable()) io.join();
  }

  std::string server_name(uint32_t s) const { return "server " + std::to_string(s) + " (" + opt.servers[s] + ")"; }

  // Whether payloads to server `s` go through shared memory: the first time (and while the server does not know the
  // layout yet, every 5 ms) it asks the server's channel for its weights segment, giving it this worker's push
  // segment. No channel: the server is on another host (auto: TCP; shm: an error).
  bool shared_memory_to(uint32_t s) {
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
    if (!transport::shm_channel_call(transport::shm_channel_address(opt.job_token, opt.servers[s]), request,
                                     l.push.fd(), &reply, &fd, std::chrono::milliseconds(2000), &error)) {
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

  // Copies slice `id`'s gradient into its slot of the push segment once the server has used the previous one.
  void write_push_slot(uint32_t s, uint32_t id, const float* values, size_t n, Clock::time_point deadline) {
    ShmLink& l = links[s];
    transport::SlotHead* head = l.table.head(l.push.data(), id);
    for (int spins = 0; head->busy.load(std::memory_order_acquire) != 0; ++spins) {
      if (abandon_copies.load()) throw Error("worker " + std::to_string(opt.rank) + ": the client closed");
      if (Clock::now() > deadline) {
        throw Error("worker " + std::to_string(opt.rank) + ": " + server_name(s) +
                    " has not used the previous push of " + layout.describe(id) +
                    " (its shared-memory slot is still busy after cluster.request_timeout_ms)");
      }
      if (spins < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    // The server reads it next; it refuses a non-finite gradient by the index found here.
    head->first_non_finite.store(copy_floats_past_cache(transport::SlotTable::values(head), values, n),
                                 std::memory_order_relaxed);
    head->busy.store(1, std::memory_order_release);
  }

  Handle submit(MessageType type, const std::string& tensor, const float* grad, float* out, size_t numel, int64_t step,
                bool copy) {
    const uint32_t tid = layout.tensor_id(tensor);
    const TensorSpec& spec = layout.tensors()[tid];
    if (numel != spec.numel) {
      throw Error(std::string(protocol::type_name(type)) + " of '" + tensor + "': " + std::to_string(numel) +
                  " elements given, the tensor has " + std::to_string(spec.numel));
    }
    if (step < 0) throw Error(std::string(protocol::type_name(type)) + " of '" + tensor + "': negative step");
    // A whole tensor travels one way: encoded when it is at least compression_min_bytes.
    const uint64_t tensor_bytes = spec.numel * sizeof(float);
    const bool pushes = type == MessageType::PUSH || type == MessageType::PUSH_PULL;
    const protocol::Encoding push_encoding = pushes ? encoder.push_encoding(tensor_bytes) : protocol::Encoding::NONE;
    std::map<uint32_t, std::vector<uint32_t>> by_server;
    for (uint32_t id : layout.slices_of(tid)) by_server[layout.slice(id).server].push_back(id);

    auto op = std::make_shared<Op>();
    op->remaining = static_cast<int>(by_server.size());
    std::vector<Part> parts;
    std::vector<HostJob> host_parts;  // host aggregation: the leader's sums to make, a member's weights to read
    const auto deadline = Clock::now() + opt.request_timeout;
    for (auto& [server, ids] : by_server) {
      const std::string slices = ids.size() == 1 ? layout.describe(ids[0]) : std::to_string(ids.size()) + " slices";
      // Host aggregation: a member hands its gradients to the host's leader, which pushes for the host and
      // publishes the weights that come back (a push_pull whatever was asked, so that the members get them).
      const bool host_push = group && pushes && server < opt.host_aggregated.size() && opt.host_aggregated[server];
      if (host_push && !group->leader()) {
        Part p;
        p.server = server;
        p.ids = ids;
        p.op = op;
        p.deadline = deadline;
        p.what = "weights of '" + tensor + "' for step " + std::to_string(step + 1) + " (" + slices +
                 ") from this host's leader, worker " + std::to_string(group->leader_rank());
        for (uint32_t id : ids) {
          const SliceInfo& s = layout.slice(id);
          group->put_gradient(id, grad + s.offset, s.length, step, deadline);
          shm_bytes_sent += s.length * sizeof(float);
          fp32_bytes_sent += s.length * sizeof(float);
          p.keys.push_back({s.tensor, s.slice, s.offset, s.length, protocol::DType::FLOAT32, protocol::Encoding::NONE});
          if (out != nullptr) p.dests.push_back(out + s.offset);
        }
        if (type == MessageType::PUSH_PULL) {
          host_parts.push_back({std::move(p), step, {}});
        } else {
          op->part_done("");
        }
        continue;
      }
      const bool host_leader = host_push;
      const MessageType part_type = host_leader ? MessageType::PUSH_PULL : type;
      Part p;
      p.server = server;
      p.ids = ids;
      // float32 both ways to a server on this host: the payloads go through shared memory.
      p.shared_memory = type != MessageType::INIT && (!pushes || push_encoding == protocol::Encoding::NONE) &&
                        encoder.pull_encoding(tensor_bytes) == protocol::Encoding::NONE && shared_memory_to(server);
      p.request_id = next_request++;
      p.type = part_type;
      p.what = std::string(protocol::type_name(part_type)) + " of '" + tensor + "' step " + std::to_string(step) +
               (host_leader ? " for this host's workers" : "") + " (" + slices + ")";
      p.op = op;
      p.deadline = deadline;
      protocol::Message m;
      m.type = part_type;
      m.request_id = p.request_id;
      m.job_token = opt.job_token;
      m.sender_role = protocol::Role::WORKER;
      m.sender_rank = opt.rank;
      m.step = step;
      m.layout_fingerprint = layout.fingerprint();
      m.checkpoint = pushes && step == checkpoint_step.load();
      m.stop = pushes && (step == stop_step.load() || (host_leader && step == group->stop_step()));
      m.pull_encoding =
          protocol::reads_weights(part_type) ? encoder.pull_encoding(tensor_bytes) : protocol::Encoding::NONE;
      if (host_leader) {
        m.contributors = opt.host_ranks;
        p.publish_version = step + 1;
        size_t n = 0;
        for (uint32_t id : ids) n += layout.slice(id).length;
        if (copy) p.own_copy.reserve(n);
        if (out == nullptr) p.scratch.resize(n);
      }
      m.shared_memory = p.shared_memory;
      if (type == MessageType::INIT) {
        for (const TensorSpec& t : layout.tensors()) m.tensors.push_back({t.name, t.numel});
        m.slice_bytes = layout.slice_bytes();
        m.num_servers = layout.num_servers();
        m.run_total_steps = opt.run_total_steps;
      }
      size_t scratch_at = 0;
      for (uint32_t id : ids) {
        const SliceInfo& s = layout.slice(id);
        m.keys.push_back({s.tensor, s.slice, s.offset, s.length, protocol::DType::FLOAT32,
                          grad != nullptr ? push_encoding : protocol::Encoding::NONE});
        if (out != nullptr) {
          p.dests.push_back(out + s.offset);
        } else if (host_leader) {
          p.dests.push_back(p.scratch.data() + scratch_at);
          scratch_at += s.length;
        }
      }
      p.keys = m.keys;
      if (!host_leader) p.frames.push_back(transport::copy_frame(protocol::encode_header(m)));
      if (grad != nullptr) {
        for (uint32_t id : ids) {
          const SliceInfo& s = layout.slice(id);
          const size_t bytes = s.length * sizeof(float);
          // Sent bytes are counted here, on the caller's thread, so that a trainer's per-epoch counts hold exactly
          // the requests it made in the epoch (the I/O thread may send the last ones after the epoch's snapshot).
          fp32_bytes_sent += bytes;
          if (host_leader) {  // the host thread sums and sends it
            if (copy) {
              const size_t at = p.own_copy.size();
              p.own_copy.insert(p.own_copy.end(), grad + s.offset, grad + s.offset + s.length);
              p.host_sums.emplace_back(id, p.own_copy.data() + at);  // reserved: no reallocation moves it
            } else {
              p.host_sums.emplace_back(id, grad + s.offset);
            }
            (p.shared_memory ? shm_bytes_sent : bytes_sent) += bytes;
          } else if (p.shared_memory) {
            // push() (the caller reuses grad at once) and small slices copy now: the copier's thread hand-off costs
            // more than a small copy (a 4 KiB round trip: 130 us through the copier, 90 us over TCP).
            if (copy || bytes <= kCopierMinBytes) {
              write_push_slot(server, id, grad + s.offset, s.length, deadline);
            } else {
              p.slot_copies.emplace_back(id, grad + s.offset);
            }
            shm_bytes_sent += bytes;
          } else if (push_encoding != protocol::Encoding::NONE) {
            zmq::message_t f = pool->message(encoder.max_encoded_bytes(s.length));
            const size_t used = encoder.encode(id, grad + s.offset, s.length, static_cast<uint8_t*>(f.data()));
            if (used != f.size()) f = zmq::message_t(f.data(), used);
            bytes_sent += f.size();
            p.frames.push_back(std::move(f));
          } else if (copy) {
            zmq::message_t f = pool->message(bytes);
            std::memcpy(f.data(), grad + s.offset, bytes);
            bytes_sent += f.size();
            p.frames.push_back(std::move(f));
          } else {
            {
              std::lock_guard<std::mutex> lock(op->mu);
              ++op->borrowed;
            }
            auto* hint = new std::shared_ptr<Op>(op);
            tsan_release(hint);  // libzmq orders this with release_borrowed, out of TSan's sight
            p.frames.emplace_back(const_cast<float*>(grad + s.offset), bytes, &release_borrowed, hint);
            bytes_sent += bytes;
          }
        }
      }
      if (host_leader) {
        host_parts.push_back({std::move(p), step, std::move(m)});
      } else {
        parts.push_back(std::move(p));
      }
    }
    const Handle h = register_op(op);
    if (!host_parts.empty()) {
      {
        std::lock_guard<std::mutex> lock(host_mu);
        for (HostJob& j : host_parts) host_jobs.push_back(std::move(j));
      }
      host_cv.notify_one();
    }
    for (const Part& p : parts) {
      if (p.slot_copies.empty()) continue;
      {  // the copier copies and sends all the parts, in order
        std::lock_guard<std::mutex> lock(copy_mu);
        copy_queue.emplace_back(op, std::move(parts));
      }
      copy_cv.notify_one();
      return h;
    }
    send_parts(parts);
    return h;
  }

  // The host's thread (host aggregation): runs the leader's sums and a member's weight reads in submission order.
  void host_loop() {
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

  // Leader: each slice's gradient summed with the members' (in rank order), then the push for the whole host.
  void send_host_sum(HostJob& job) {
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

  // Member: the weights the leader publishes for step + 1.
  void read_host_weights(HostJob& job) {
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

  void copy_loop() {
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

  // Registers the request's handle and sends its parts: itself when the sockets are free (after any parts queued
  // before, to keep the order), else through the poller's queue.
  Handle dispatch(const std::shared_ptr<Op>& op, std::vector<Part>& parts) {
    const Handle h = register_op(op);
    send_parts(parts);
    return h;
  }

  Handle register_op(const std::shared_ptr<Op>& op) {
    const Handle h = next_handle++;
    std::lock_guard<std::mutex> lock(ops_mu);
    ops[h] = op;
    return h;
  }

  void send_parts(std::vector<Part>& parts) {
    if (parts.empty()) return;
    bool queued = false;
    {
      std::lock_guard<std::mutex> lock(io_mu);
      queued = poller != Poller::kNone;
      if (queued) {
        for (Part& p : parts) queue.push_back(std::move(p));
      } else {
        poller = Poller::kCaller;
        unattended = false;
      }
    }
    if (queued) {
      wake.notify();
      return;
    }
    send_queued();
    for (Part& p : parts) send_part(p);
    release();
  }

  // The poller lets go of the sockets. Requests still in flight wait for the next caller that waits, or for the I/O
  // thread's next look (kScanPeriod); it is called now when someone is blocked on them or parts are queued.
  void release() {
    bool call_io = false;
    {
      std::lock_guard<std::mutex> lock(io_mu);
      poller = Poller::kNone;
      unattended = !inflight.empty();
      call_io = !queue.empty() || (unattended && parked > 0);
    }
    if (call_io) io_cv.notify_one();
  }

  Handle shutdown_all(MessageType type = MessageType::SHUTDOWN) {
    auto op = std::make_shared<Op>();
    op->remaining = static_cast<int>(opt.servers.size());
    std::vector<Part> parts;
    for (uint32_t s = 0; s < opt.servers.size(); ++s) {
      Part p;
      p.server = s;
      p.request_id = next_request++;
      p.type = type;
      p.what = protocol::type_name(type);
      p.op = op;
      p.deadline = Clock::now() + opt.request_timeout;
      protocol::Message m;
      m.type = type;
      m.request_id = p.request_id;
      m.job_token = opt.job_token;
      m.sender_role = protocol::Role::WORKER;
      m.sender_rank = opt.rank;
      p.frames.push_back(transport::copy_frame(protocol::encode_header(m)));
      parts.push_back(std::move(p));
    }
    return dispatch(op, parts);
  }

  bool wait(Handle h, const std::chrono::milliseconds* timeout) {
    std::shared_ptr<Op> op;
    {
      std::lock_guard<std::mutex> lock(ops_mu);
      auto it = ops.find(h);
      if (it == ops.end()) throw Error("wait: handle " + std::to_string(h) + " is unknown or was already waited for");
      op = it->second;
    }
    // The poller fails every part at its deadline; the extra margin only guards against a bug.
    const auto limit = Clock::now() + (timeout ? *timeout : opt.request_timeout + std::chrono::seconds(10));
    bool finished = false;
    if (!poll_until_done(*op, limit, finished)) {  // another thread polls: it completes `op`
      {
        std::unique_lock<std::mutex> lock(op->mu);
        finished = op->cv.wait_until(lock, limit, [&] { return op->remaining == 0; });
      }
      std::lock_guard<std::mutex> lock(io_mu);
      --parked;
    }
    if (!finished) {
      if (timeout) return false;
      throw Error("worker " + std::to_string(opt.rank) + ": request " + std::to_string(h) + " got no completion");
    }
    {
      std::lock_guard<std::mutex> ops_lock(ops_mu);
      ops.erase(h);
    }
    std::unique_lock<std::mutex> lock(op->mu);
    // ZeroMQ drops its reference to a zero-copy frame right after sending it; wait for that so
    // the caller may free the buffer (bounded: after a timeout the frame may sit in a dead queue).
    op->cv.wait_for(lock, std::chrono::seconds(1), [&] { return op->borrowed == 0; });
    if (!op->error.empty()) {
      if (op->error_code != protocol::ErrorCode::NONE) throw KvError(op->error, op->error_code);
      throw Error(op->error);
    }
    return true;
  }

  static bool done(Op& op) {
    std::lock_guard<std::mutex> lock(op.mu);
    return op.remaining == 0;
  }

  // A caller about to block on `op`: when the sockets are free it polls them itself until `op` is done or `limit`
  // (taking every reply that arrives, not only its own) and sets `finished`. Returns false when another thread polls:
  // the caller is then counted as parked (so that a poller letting go calls the I/O thread) and blocks on `op`.
  bool poll_until_done(Op& op, Clock::time_point limit, bool& finished) {
    finished = done(op);
    if (finished) return true;
    {
      std::lock_guard<std::mutex> lock(io_mu);
      if (poller != Poller::kNone) {
        ++parked;
        return false;
      }
      poller = Poller::kCaller;
      unattended = false;
    }
    struct Release {
      Impl& self;
      ~Release() { self.release(); }
    } release_on_exit{*this};
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(limit - Clock::now());
      pump(std::clamp(left, std::chrono::milliseconds(0), kScanPeriod));
      finished = done(op);
      if (finished || Clock::now() >= limit) return true;
    }
  }

  // ---- the poller (a waiting caller or the I/O thread) -----------------------------------------------

  static constexpr std::chrono::milliseconds kScanPeriod{10};  // deadlines and stalls are checked this often

  // The poller's.
  std::unordered_map<uint64_t, Part> inflight;
  std::vector<zmq::pollitem_t> items;
  std::vector<zmq::message_t> frames;
  Clock::time_point next_scan = Clock::now();

  // One turn of the poller: waits up to `timeout` for a reply or queued parts, sends the queued parts, takes every
  // reply that arrived and fails the parts past their deadline. Throws zmq::error_t when polling fails (not EINTR).
  void pump(std::chrono::milliseconds timeout) {
    items.resize(sockets.size() + 1);
    for (size_t s = 0; s < sockets.size(); ++s) items[s] = {sockets[s].handle(), 0, ZMQ_POLLIN, 0};
    items.back() = {nullptr, wake.fd(), ZMQ_POLLIN, 0};
    try {
      zmq::poll(items.data(), items.size(), timeout);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
      return;
    }
    if (items.back().revents & ZMQ_POLLIN) {
      wake.drain();
      send_queued();
    }
    for (size_t s = 0; s < sockets.size(); ++s) {
      if (!(items[s].revents & ZMQ_POLLIN)) continue;
      while (receive(static_cast<uint32_t>(s), frames)) on_reply(static_cast<uint32_t>(s), frames);
    }
    const auto now = Clock::now();
    if (now >= next_scan) {
      expire(now);
      next_scan = now + kScanPeriod;
    }
  }

  // The I/O thread polls while requests are in flight that no caller waits on (and sends parts queued meanwhile).
  void io_loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(io_mu);
        const auto needed = [&] { return poller == Poller::kNone && (unattended || !queue.empty()); };
        io_cv.wait_for(lock, kScanPeriod, [&] { return stopping || needed(); });
        if (stopping) break;
        if (!needed()) continue;
        poller = Poller::kIoThread;
        unattended = false;
      }
      try {
        do {
          pump(kScanPeriod);
        } while (!stopping && !inflight.empty());
      } catch (const zmq::error_t& e) {
        PSHARD_LOG(kError) << "worker " << opt.rank << ": poll failed: " << e.what();
        fail_everything(std::string("the I/O thread's poll failed (") + e.what() + ")");  // still the poller
        release();
        return;
      }
      release();
    }
    // No caller is inside a call any more (the client is being destroyed), so nobody else polls.
    fail_everything("client stopped");
  }

  // The poller fails every request in flight or queued.
  void fail_everything(const std::string& why) {
    for (auto& [id, p] : inflight)
      p.op->part_done("worker " + std::to_string(opt.rank) + ": " + why + " during " + p.what);
    inflight.clear();
    std::lock_guard<std::mutex> lock(io_mu);
    for (Part& p : queue) p.op->part_done("worker " + std::to_string(opt.rank) + ": " + why + " before " + p.what);
    queue.clear();
  }

  bool receive(uint32_t s, std::vector<zmq::message_t>& frames) {
    try {
      return transport::recv_frames(sockets[s], frames);
    } catch (const zmq::error_t& e) {
      PSHARD_LOG(kWarn) << "worker " << opt.rank << ": receive from " << server_name(s) << " failed: " << e.what();
      return false;
    }
  }

  void send_queued() {
    std::deque<Part> batch;
    {
      std::lock_guard<std::mutex> lock(io_mu);
      batch.swap(queue);
    }
    for (Part& p : batch) send_part(p);
  }

  void send_part(Part& p) {
    // Never a blocking send: the DEALER queues messages for a connection that is not up yet, so a send that would
    // block means the socket has no connection left at all. libzmq ends a connection whose security handshake
    // failed (another job's token, a peer that is not a pshard server) without reconnecting, and a blocking send
    // would then wait forever, past every timeout.
    bool sent = false;
    try {
      sent = transport::send_frames(sockets[p.server], p.frames, zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      p.op->part_done("worker " + std::to_string(opt.rank) + ": sending " + p.what + " to " + server_name(p.server) +
                      " failed: " + e.what());
      return;
    }
    if (!sent) {
      p.op->part_done("worker " + std::to_string(opt.rank) + ": sending " + p.what + " to " + server_name(p.server) +
                      " failed: no connection to it (its handshake failed: is it a server of this job, with the "
                      "same job token and security settings?)");
      return;
    }
    p.frames.clear();
    p.sent_at = Clock::now();
    const uint64_t id = p.request_id;
    inflight.emplace(id, std::move(p));
  }

  // One line per server and period for the requests waiting longer than stall_warn: the oldest named.
  void warn_stalled(Clock::time_point now) {
    std::map<uint32_t, std::pair<const Part*, int>> by_server;  // server -> (oldest due part, how many are due)
    for (auto& [id, p] : inflight) {
      if (now - p.sent_at < opt.stall_warn * (p.stall_warnings + 1)) continue;
      ++p.stall_warnings;
      auto& [oldest, n] = by_server[p.server];
      if (!oldest || p.sent_at < oldest->sent_at) oldest = &p;
      ++n;
    }
    for (const auto& [server, due] : by_server) {
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - due.first->sent_at);
      PSHARD_LOG(kWarn) << due.first->what
                        << (due.second > 1 ? " and " + std::to_string(due.second - 1) + " more request(s)" : "")
                        << " waited " << waited.count() << " ms for " << server_name(server)
                        << " (see that server's log for whom it waits)";
    }
  }

  void expire(Clock::time_point now) {
    if (opt.stall_warn.count() > 0) warn_stalled(now);
    for (auto it = inflight.begin(); it != inflight.end();) {
      if (it->second.deadline <= now) {
        const Part& p = it->second;
        p.op->part_done("worker " + std::to_string(opt.rank) + ": timeout after " +
                        std::to_string(opt.request_timeout.count()) + " ms: " + server_name(p.server) +
                        " did not answer " + p.what + " (request " + std::to_string(p.request_id) + ")");
        it = inflight.erase(it);
      } else {
        ++it;
      }
    }
  }

  void on_reply(uint32_t s, std::vector<zmq::message_t>& frames) {
    std::vector<protocol::FrameView> v = transport::views(frames, 0);
    protocol::Decoded d = protocol::decode(v.data(), v.size());
    auto it = inflight.find(d.message.request_id);
    if (it == inflight.end() || it->second.server != s) {
      PSHARD_LOG(kDebug) << "worker " << opt.rank << ": ignoring a reply from " << server_name(s) << " to request "
                         << d.message.request_id << " (late or unknown)";
      return;
    }
    Part p = std::move(it->second);
    inflight.erase(it);
    heard[s] = true;
    const std::string who = "worker " + std::to_string(opt.rank) + ": " + server_name(s);
    if (!d.ok) {
      p.op->part_done(who + " sent a malformed reply to " + p.what + ": " + d.error);
      return;
    }
    const protocol::Message& m = d.message;
    // Before the request is done, so that whoever waited for it sees the stop (stop_at()).
    if (m.stop_at > 0) {
      stop_at.store(m.stop_at, std::memory_order_release);
      if (p.publish_version > 0) group->set_stop_at(m.stop_at);  // before the members see the weights
    }
    if (m.type == MessageType::ERROR) {
      p.op->part_done(
          who + " refused " + p.what + ": " + protocol::error_code_name(m.error_code) + ": " + m.error_message,
          m.error_code);
      return;
    }
    const bool wants_weights = protocol::reads_weights(p.type);
    if (m.type != protocol::reply_type(p.type)) {
      p.op->part_done(who + " answered " + p.what + " with '" + protocol::type_name(m.type) + "'");
      return;
    }
    if (p.type == MessageType::PING) {
      std::lock_guard<std::mutex> lock(p.op->mu);
      p.op->max_step = std::max(p.op->max_step, m.step);
    }
    if (wants_weights) {
      if (m.keys.size() != p.keys.size()) {
        p.op->part_done(who + " answered " + p.what + " with " + std::to_string(m.keys.size()) + " keys, expected " +
                        std::to_string(p.keys.size()));
        return;
      }
      for (size_t k = 0; k < p.keys.size(); ++k) {
        if (m.keys[k].tensor != p.keys[k].tensor || m.keys[k].slice != p.keys[k].slice ||
            m.keys[k].length != p.keys[k].length) {
          p.op->part_done(who + " answered " + p.what + " with the wrong key at position " + std::to_string(k));
          return;
        }
      }
      if (m.shared_memory != p.shared_memory) {
        p.op->part_done(who + " answered " + p.what + (m.shared_memory ? " through" : " not through") +
                        " shared memory");
        return;
      }
      if (m.shared_memory) {
        ShmLink& l = links[s];
        for (size_t k = 0; k < p.keys.size(); ++k) {
          if (!transport::read_slot(l.table.head(l.weights.data(), p.ids[k]), p.dests[k], p.keys[k].length)) {
            p.op->part_done(who + ": the weights of " + layout.describe(p.ids[k]) +
                            " changed during every read of its shared-memory slot");
            return;
          }
          shm_bytes_recv += p.keys[k].length * sizeof(float);
          fp32_bytes_recv += p.keys[k].length * sizeof(float);
        }
        publish_to_host(p);
        p.op->part_done("");
        return;
      }
      // decode() checked each payload against its key's length and encoding.
      for (size_t k = 0; k < p.keys.size(); ++k) {
        const protocol::FrameView& f = m.payloads[k];
        if (m.keys[k].encoding == protocol::Encoding::NONE) {
          std::memcpy(p.dests[k], f.data, f.size);
        } else {
          compression::decode_encoded(m.keys[k].encoding, f.data, f.size, p.keys[k].length, p.dests[k]);
        }
        bytes_recv += f.size;
        fp32_bytes_recv += p.keys[k].length * sizeof(float);
      }
      publish_to_host(p);
    }
    p.op->part_done("");
  }

  // Leader: the weights its host's push brought back, for the members.
  void publish_to_host(const Part& p) {
    if (p.publish_version == 0) return;
    for (size_t k = 0; k < p.keys.size(); ++k) {
      group->publish(p.ids[k], p.dests[k], p.keys[k].length, p.publish_version);
      shm_bytes_sent += p.keys[k].length * sizeof(float);
    }
  }
};

namespace {

// cluster.host_aggregation: which of `o`'s servers this worker's host pushes to once for all its workers. Every worker
// of the job decides from the same config and cluster map, so the workers of a host agree.
void aggregate_per_host(const Config& cfg, const ClusterMap& map, KvClientOptions& o) {
  if (o.rank >= map.workers.size()) return;
  if (!map.workers[o.rank].locality.empty()) {
    std::vector<std::string> localities;
    for (const NodeInfo& w : map.workers) localities.push_back(w.locality);
    o.host = host_ranks(localities, o.rank).front();
  } else {
    o.host = o.rank;
  }
  const std::string mode = cfg.get_string("cluster.host_aggregation");
  if (mode == "off") return;
  std::vector<std::string> why_not;
  if (cfg.get_string("cluster.mode") != "sync") why_not.push_back("cluster.mode = sync");
  if (cfg.get_string("cluster.failure_policy") != "abort") why_not.push_back("cluster.failure_policy = abort");
  if (map.elastic()) why_not.push_back("cluster.min_workers = 0");
  if (cfg.get_bool("cluster.restart_workers")) why_not.push_back("cluster.restart_workers = false");
  if (o.compression.push != protocol::Encoding::NONE) why_not.push_back("cluster.compression = none");
  if (!why_not.empty()) {
    if (mode == "always") {
      std::string needs;
      for (const std::string& w : why_not) needs += (needs.empty() ? "" : ", ") + w;
      throw Error("cluster.host_aggregation = always needs " + needs +
                  " (a host's sum counts for all its workers in one sync step, each worker's own state aside)");
    }
    return;
  }
  const std::string& here = map.workers[o.rank].locality;
  if (here.empty()) return;  // a coordinator that does not know localities
  std::vector<std::string> localities;
  for (const NodeInfo& w : map.workers) localities.push_back(w.locality);
  std::vector<uint32_t> ranks = host_ranks(localities, o.rank);
  if (ranks.size() < 2) return;
  o.host_aggregated.assign(map.servers.size(), 0);
  bool any = false;
  for (size_t s = 0; s < map.servers.size(); ++s) {
    o.host_aggregated[s] = mode == "always" || map.servers[s].locality != here;
    any = any || o.host_aggregated[s];
  }
  if (any) o.host_ranks = std::move(ranks);
}

}  // namespace

KvClientOptions KvClientOptions::from_config(const Config& cfg) {
  KvClientOptions o;
  o.slice_bytes = static_cast<uint64_t>(cfg.get_int("cluster.slice_bytes"));
  o.request_timeout = std::chrono::milliseconds(cfg.get_int("cluster.request_timeout_ms"));
  o.stall_warn = std::chrono::milliseconds(cfg.get_int("cluster.stall_warn_ms"));
  o.compression = compression::Settings::from_config(cfg);
  o.transport = transport::parse_payload_transport(cfg.get_string("cluster.transport"));
  return o;
}

KvClientOptions KvClientOptions::from_config(const Config& cfg, const ClusterClient& cluster,
                                             const ClusterClient::Options& registered, std::vector<TensorSpec> tensors,
                                             int64_t run_total_steps) {
  KvClientOptions o = from_config(cfg);
  o.rank = cluster.rank();
  for (const NodeInfo& s : cluster.map().servers) o.servers.push_back(s.endpoint);
  o.tensors = std::move(tensors);
  o.job_token = registered.job_token;
  o.curve = registered.curve;
  o.run_total_steps = run_total_steps;
  aggregate_per_host(cfg, cluster.map(), o);
  return o;
}

KvClient::KvClient(KvClientOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
KvClient::~KvClient() = default;

const SliceLayout& KvClient::layout() const { return impl_->layout; }

KvClient::Handle KvClient::init(const std::string& tensor, const float* weights, size_t numel) {
  return impl_->submit(MessageType::INIT, tensor, weights, nullptr, numel, 0, true);
}
KvClient::Handle KvClient::push(const std::string& tensor, const float* grad, size_t numel, int64_t step) {
  return impl_->submit(MessageType::PUSH, tensor, grad, nullptr, numel, step, true);
}
KvClient::Handle KvClient::zpush(const std::string& tensor, const float* grad, size_t numel, int64_t step) {
  return impl_->submit(MessageType::PUSH, tensor, grad, nullptr, numel, step, false);
}
KvClient::Handle KvClient::zpull(const std::string& tensor, float* out, size_t numel, int64_t step) {
  return impl_->submit(MessageType::PULL, tensor, nullptr, out, numel, step, false);
}
KvClient::Handle KvClient::pull(const std::string& tensor, std::vector<float>* out, int64_t step) {
  out->resize(impl_->layout.tensors()[impl_->layout.tensor_id(tensor)].numel);
  return impl_->submit(MessageType::PULL, tensor, nullptr, out->data(), out->size(), step, false);
}
KvClient::Handle KvClient::push_pull(const std::string& tensor, const float* grad, float* out, size_t numel,
                                     int64_t step) {
  return impl_->submit(MessageType::PUSH_PULL, tensor, grad, out, numel, step, true);
}
KvClient::Handle KvClient::zpush_pull(const std::string& tensor, const float* grad, float* out, size_t numel,
                                      int64_t step) {
  return impl_->submit(MessageType::PUSH_PULL, tensor, grad, out, numel, step, false);
}
KvClient::Handle KvClient::shutdown_servers() { return impl_->shutdown_all(); }
void KvClient::request_checkpoint(int64_t step) { impl_->checkpoint_step = step; }
void KvClient::request_stop(int64_t step) {
  impl_->stop_step = step;
  if (impl_->group && !impl_->group->leader()) impl_->group->request_stop(step);  // the leader pushes for it
}
int64_t KvClient::stop_at() const {
  const int64_t own = impl_->stop_at.load(std::memory_order_acquire);
  if (!impl_->group || impl_->group->leader()) return own;
  return std::max(own, impl_->group->stop_at());  // a member hears the servers through its leader
}
KvClient::Handle KvClient::join(const std::string& tensor, float* out, size_t numel, int64_t step) {
  return impl_->submit(MessageType::JOIN, tensor, nullptr, out, numel, step, false);
}
int64_t KvClient::servers_step() {
  const Handle h = impl_->shutdown_all(MessageType::PING);
  std::shared_ptr<Op> op;
  {
    std::lock_guard<std::mutex> lock(impl_->ops_mu);
    op = impl_->ops.at(h);
  }
  wait(h);  // throws on a timeout or an error reply
  std::lock_guard<std::mutex> lock(op->mu);
  return op->max_step;
}
KvTraffic KvClient::traffic() const {
  return {impl_->bytes_sent.load(),      impl_->bytes_recv.load(),     impl_->fp32_bytes_sent.load(),
          impl_->fp32_bytes_recv.load(), impl_->shm_bytes_sent.load(), impl_->shm_bytes_recv.load()};
}
uint32_t KvClient::host() const { return impl_->opt.host; }
void KvClient::wait(Handle h) { impl_->wait(h, nullptr); }
bool KvClient::wait_for(Handle h, std::chrono::milliseconds timeout) { return impl_->wait(h, &timeout); }

}  // namespace pshard
