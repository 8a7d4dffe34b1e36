// The shared-memory data plane (cluster.transport = shm) with servers and workers in one process: sync steps give
// the same bits as over TCP with no payload byte on a socket, async and SSP work the same, the channel refuses
// another job's token, a wrong rank, and push segments of the wrong size (naming them), and the segments themselves
// (sizes, slots, seqlock).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/keys/slice_layout.h"
#include "common/transport/shm_channel.h"
#include "common/transport/shm_segment.h"
#include "common/transport/weights_slot.h"
#include "optim/optimizer.h"
#include "server/kv/kv_server.h"
#include "worker/client/kv_client.h"

namespace pshard {
namespace {

using transport::PayloadTransport;

const std::vector<TensorSpec> kTensors = {{"fc1.weight", 300}, {"fc1.bias", 37}, {"fc2.weight", 129}};
constexpr uint64_t kSliceBytes = 256;  // 64 floats: several slices per tensor, some partial

struct Job {
  std::vector<std::unique_ptr<KvServer>> servers;
  std::vector<std::string> endpoints;
  PayloadTransport transport;
  std::vector<TensorSpec> tensors;
  uint64_t slice_bytes;
  Job(uint32_t s, uint32_t w, Consistency mode, PayloadTransport t, const std::string& optimizer = "momentum",
      std::vector<TensorSpec> model = kTensors, uint64_t slice = kSliceBytes,
      const std::vector<int64_t>& worker_pids = {})
      : transport(t), tensors(std::move(model)), slice_bytes(slice) {
    for (uint32_t r = 0; r < s; ++r) {
      KvServerOptions o;
      o.rank = r;
      o.num_servers = s;
      o.num_workers = w;
      o.job_token = "job";
      o.mode = mode;
      o.slice_bytes = slice_bytes;
      optim::OptimizerParams p;
      p.name = optimizer;
      p.lr = 0.1f;
      o.optimizer = optim::make_optimizer(p);
      o.lr_at = [](int64_t) { return 0.1f; };
      o.transport = t;
      o.worker_pids = worker_pids;
      servers.push_back(std::make_unique<KvServer>(o));
      endpoints.push_back(servers.back()->endpoint());
    }
  }
  KvClientOptions client(uint32_t rank) const {
    KvClientOptions c;
    c.rank = rank;
    c.servers = endpoints;
    c.tensors = tensors;
    c.slice_bytes = slice_bytes;
    c.job_token = "job";
    c.request_timeout = std::chrono::milliseconds(20000);
    c.transport = transport;
    return c;
  }
};

float grad(uint32_t rank, int64_t step, size_t t, size_t i) {
  return std::sin(0.3f * static_cast<float>(i) + 0.7f * static_cast<float>(step) + static_cast<float>(t)) *
         (1.0f + static_cast<float>(rank));
}

// W workers x `steps` sync steps of push_pull on every tensor; returns worker 0's final weights and the job's
// traffic (summed over the workers).
std::vector<std::vector<float>> train(Job& job, uint32_t workers, int64_t steps, KvTraffic* traffic) {
  std::vector<std::unique_ptr<KvClient>> kv;
  for (uint32_t r = 0; r < workers; ++r) kv.push_back(std::make_unique<KvClient>(job.client(r)));
  std::vector<std::vector<float>> w(job.tensors.size());
  for (size_t t = 0; t < job.tensors.size(); ++t) {
    w[t].resize(job.tensors[t].numel);
    for (size_t i = 0; i < w[t].size(); ++i) w[t][i] = 0.01f * static_cast<float>(i % 17);
    kv[0]->wait(kv[0]->init(job.tensors[t].name, w[t].data(), w[t].size()));
  }
  std::vector<std::vector<std::vector<float>>> mine(workers, w);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < workers; ++r) {
    threads.emplace_back([&, r] {
      for (size_t t = 0; t < job.tensors.size(); ++t) {
        kv[r]->wait(kv[r]->zpull(job.tensors[t].name, mine[r][t].data(), mine[r][t].size(), 0));
      }
      for (int64_t s = 0; s < steps; ++s) {
        std::vector<KvClient::Handle> hs;
        std::vector<std::vector<float>> g(job.tensors.size());
        for (size_t t = 0; t < job.tensors.size(); ++t) {
          g[t].resize(job.tensors[t].numel);
          for (size_t i = 0; i < g[t].size(); ++i) g[t][i] = grad(r, s, t, i) + 1e-3f * mine[r][t][i];
          hs.push_back(kv[r]->push_pull(job.tensors[t].name, g[t].data(), mine[r][t].data(), g[t].size(), s));
        }
        for (auto h : hs) kv[r]->wait(h);
      }
    });
  }
  for (auto& th : threads) th.join();
  *traffic = {};
  for (auto& c : kv) {
    const KvTraffic t = c->traffic();
    traffic->bytes_sent += t.bytes_sent;
    traffic->bytes_recv += t.bytes_recv;
    traffic->shm_bytes_sent += t.shm_bytes_sent;
    traffic->shm_bytes_recv += t.shm_bytes_recv;
  }
  for (uint32_t r = 1; r < workers; ++r) EXPECT_EQ(mine[r], mine[0]) << "worker " << r << " ended elsewhere";
  return mine[0];
}

uint64_t model_bytes() {
  uint64_t n = 0;
  for (const TensorSpec& t : kTensors) n += t.numel * sizeof(float);
  return n;
}

TEST(KvSharedMemory, SyncStepsGiveTheBitsOfTcpWithNoPayloadOnASocket) {
  constexpr int64_t kSteps = 6;
  KvTraffic tcp_traffic, shm_traffic;
  Job tcp(2, 3, Consistency::kBsp, PayloadTransport::kTcp);
  const auto over_tcp = train(tcp, 3, kSteps, &tcp_traffic);
  Job shm(2, 3, Consistency::kBsp, PayloadTransport::kShm);
  const auto over_shm = train(shm, 3, kSteps, &shm_traffic);
  EXPECT_EQ(over_shm, over_tcp);  // bit for bit

  // Over TCP every push and pull went through the sockets; with shared memory only worker 0's init (over TCP) and
  // the first pulls (the channel opens once the server knows the layout) can.
  EXPECT_EQ(tcp_traffic.shm_bytes_sent + tcp_traffic.shm_bytes_recv, 0u);
  EXPECT_EQ(shm_traffic.shm_bytes_sent, 3 * kSteps * model_bytes());
  EXPECT_GE(shm_traffic.shm_bytes_recv, 3 * kSteps * model_bytes());
  EXPECT_LE(shm_traffic.bytes_sent, model_bytes());  // the init
  uint64_t server_shm_in = 0, server_tcp_in = 0;
  for (auto& s : shm.servers) {
    server_shm_in += s->stats().shm_bytes_received;
    server_tcp_in += s->stats().bytes_received;
  }
  EXPECT_EQ(server_shm_in, 3 * kSteps * model_bytes());
  EXPECT_EQ(server_tcp_in, model_bytes());
}

// Slices of 16,384 floats, whose copies into and out of the slots stream past the cache (common/util/stream_copy.h),
// with odd sizes that leave tails: the same bits as over TCP. A NaN or an infinity is refused naming its element,
// found by the worker as it copied the gradient into its slot, and that slice's weights stay as they were.
TEST(KvSharedMemory, LargeSlicesGiveTheBitsOfTcpAndANonFiniteGradientIsRefusedNamingItsElement) {
  const std::vector<TensorSpec> model = {{"conv.weight", 70001}, {"fc.bias", 1027}};
  constexpr uint64_t kLargeSlice = 64 << 10;
  KvTraffic tcp_traffic, shm_traffic;
  Job tcp(2, 2, Consistency::kBsp, PayloadTransport::kTcp, "momentum", model, kLargeSlice);
  const auto over_tcp = train(tcp, 2, 3, &tcp_traffic);
  Job shm(2, 2, Consistency::kBsp, PayloadTransport::kShm, "momentum", model, kLargeSlice);
  const auto over_shm = train(shm, 2, 3, &shm_traffic);
  EXPECT_EQ(over_shm, over_tcp);  // bit for bit
  EXPECT_EQ(shm_traffic.shm_bytes_sent, 2 * 3 * (70001 + 1027) * sizeof(float));

  for (const float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    Job job(1, 1, Consistency::kBsp, PayloadTransport::kShm, "sgd", model, kLargeSlice);
    KvClient kv(job.client(0));
    std::vector<float> w(70001, 1.0f), g(70001, 0.5f), out(70001, 0.0f);
    kv.wait(kv.init("conv.weight", w.data(), w.size()));
    std::vector<float> b(1027, 0.0f);
    kv.wait(kv.init("fc.bias", b.data(), b.size()));
    kv.wait(kv.zpull("conv.weight", out.data(), out.size(), 0));  // opens the shared memory
    g[2 * 16384 + 777] = bad;                                     // slice 2, element 777
    try {
      kv.wait(kv.push_pull("conv.weight", g.data(), out.data(), g.size(), 0));
      ADD_FAILURE() << "a push holding " << bad << " was accepted";
    } catch (const Error& e) {
      const std::string why = e.what();
      EXPECT_NE(why.find("worker 0 pushed a non-finite gradient for conv.weight"), std::string::npos) << why;
      EXPECT_NE(why.find(std::string("(element 777 is ") + (std::isnan(bad) ? "nan" : "inf") + ")"), std::string::npos)
          << why;
    }
    EXPECT_GT(kv.traffic().shm_bytes_sent, 0u);
    // The refusal is the slice's: slice 2 keeps its weights, the others took the step (lr 0.1 x 0.5).
    kv.wait(kv.zpull("conv.weight", out.data(), out.size(), 0));
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_EQ(out[i], i / 16384 == 2 ? 1.0f : 1.0f - 0.1f * 0.5f) << "element " << i;
    }
  }
}

TEST(KvSharedMemory, AsyncPushesAreEachAppliedOnce) {
  // SGD without momentum, lr 0.1 in async mode: the final weights are the initial ones minus 0.1 x every gradient,
  // whatever the order (float rounding aside).
  Job job(1, 2, Consistency::kAsp, PayloadTransport::kShm, "sgd");
  std::vector<std::unique_ptr<KvClient>> kv;
  for (uint32_t r = 0; r < 2; ++r) kv.push_back(std::make_unique<KvClient>(job.client(r)));
  std::vector<float> w(kTensors[0].numel, 1.0f);
  kv[0]->wait(kv[0]->init(kTensors[0].name, w.data(), w.size()));
  for (size_t t = 1; t < kTensors.size(); ++t) {
    std::vector<float> z(kTensors[t].numel, 0.0f);
    kv[0]->wait(kv[0]->init(kTensors[t].name, z.data(), z.size()));
  }
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> g(kTensors[0].numel, 0.5f), mine(kTensors[0].numel);
      for (int64_t s = 0; s < 10; ++s)
        kv[r]->wait(kv[r]->push_pull(kTensors[0].name, g.data(), mine.data(), g.size(), s));
    });
  }
  for (auto& th : threads) th.join();
  kv[0]->wait(kv[0]->zpull(kTensors[0].name, w.data(), w.size(), 0));
  // 2 workers x 10 pushes of 0.5 at lr 0.1: 1 - 20 x 0.05 = 0.
  for (size_t k = 0; k < w.size(); ++k) ASSERT_NEAR(w[k], 0.0f, 1e-5f) << k;
  EXPECT_GT(kv[1]->traffic().shm_bytes_sent, 0u);
}

// A raw channel request to server 0 of `job`: returns the reply's text.
std::string channel_request(const Job& job, const std::string& token, const std::string& rank, size_t segment_bytes,
                            uint32_t servers = 2) {
  transport::SharedSegment push = transport::SharedSegment::create("test push", segment_bytes);
  const std::string request = "token " + token + "\nrank " + rank + "\nfingerprint " +
                              std::to_string(SliceLayout(kTensors, kSliceBytes, servers).fingerprint()) + "\n";
  std::string reply, error;
  int fd = -1;
  EXPECT_TRUE(transport::shm_channel_call(transport::shm_channel_address("job", job.endpoints[0]), request, push.fd(),
                                          &reply, &fd, std::chrono::milliseconds(5000), &error))
      << error;
  if (fd >= 0) ::close(fd);
  return reply;
}

TEST(KvSharedMemory, TheChannelRefusesStrangersWrongRanksAndSegmentsOfTheWrongSize) {
  Job job(2, 2, Consistency::kBsp, PayloadTransport::kShm);
  const SliceLayout layout(kTensors, kSliceBytes, 2);
  const size_t exact = transport::SlotTable(layout, 0).bytes();
  // Before the layout is known the server asks to come back.
  EXPECT_EQ(channel_request(job, "job", "0", exact).rfind("retry", 0), 0u);
  {
    KvClient kv(job.client(0));  // worker 0's init tells the servers the layout
    for (const TensorSpec& t : kTensors) {
      std::vector<float> w(t.numel, 0.0f);
      kv.wait(kv.init(t.name, w.data(), w.size()));
    }
  }
  std::string r = channel_request(job, "another-job", "0", exact);
  EXPECT_EQ(r.rfind("refused", 0), 0u) << r;
  EXPECT_NE(r.find("token"), std::string::npos) << r;
  r = channel_request(job, "job", "7", exact);
  EXPECT_NE(r.find("worker rank '7'"), std::string::npos) << r;
  r = channel_request(job, "job", "1", exact - 64);
  EXPECT_NE(r.find("worker 1's push segment for server 0 has " + std::to_string(exact - 64) + " bytes"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find("truncated"), std::string::npos) << r;
  r = channel_request(job, "job", "1", exact + (size_t(1) << 20));
  EXPECT_NE(r.find("oversized"), std::string::npos) << r;
  EXPECT_EQ(channel_request(job, "job", "1", exact).rfind("ok", 0), 0u);
}

// A process of the job's user that knows the token cannot put its push segment in place of a live worker's (the
// worker would then be declared stuck): the rank's first process holds it until it ends; the same process may attach
// again.
TEST(KvSharedMemory, ALiveWorkersSegmentIsNotReplacedByAnotherProcess) {
  Job job(1, 2, Consistency::kBsp, PayloadTransport::kShm);
  const size_t exact = transport::SlotTable(SliceLayout(kTensors, kSliceBytes, 1), 0).bytes();
  {
    KvClient kv(job.client(0));
    for (const TensorSpec& t : kTensors) {
      std::vector<float> w(t.numel, 0.0f);
      kv.wait(kv.init(t.name, w.data(), w.size()));
    }
  }
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(from_child), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // attaches worker 1's segment, says so, and stays until told to go
    const bool ok = channel_request(job, "job", "1", exact, 1).rfind("ok", 0) == 0;
    char c = ok ? 'y' : 'n';
    (void)!::write(from_child[1], &c, 1);
    (void)!::read(to_child[0], &c, 1);
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(from_child[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  const std::string r = channel_request(job, "job", "1", exact, 1);
  EXPECT_EQ(r.rfind("refused", 0), 0u) << r;
  EXPECT_NE(r.find("worker 1's push segment for server 0 is attached by process " + std::to_string(child) +
                   ", which still runs"),
            std::string::npos)
      << r;
  (void)!::write(to_child[1], &c, 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(channel_request(job, "job", "1", exact, 1).rfind("ok", 0), 0u);  // its process ended: a restart
  EXPECT_EQ(channel_request(job, "job", "1", exact, 1).rfind("ok", 0), 0u);  // the same process again
  for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
}

// A forked process of the job's user that asks the channel for worker `rank`'s place on request ('r': the reply
// comes back; 'q': it ends).
struct Stranger {
  pid_t pid = -1;
  int to[2] = {-1, -1}, from[2] = {-1, -1};
  Stranger(const Job& job, const std::string& rank, size_t segment_bytes) {
    EXPECT_EQ(::pipe(to), 0);
    EXPECT_EQ(::pipe(from), 0);
    pid = ::fork();
    if (pid != 0) return;
    for (char c = 0; ::read(to[0], &c, 1) == 1 && c == 'r';) {
      const std::string reply = channel_request(job, "job", rank, segment_bytes, 1);
      const uint32_t n = static_cast<uint32_t>(reply.size());
      (void)!::write(from[1], &n, sizeof n);
      (void)!::write(from[1], reply.data(), n);
    }
    ::_exit(0);
  }
  std::string ask() {
    char c = 'r';
    uint32_t n = 0;
    if (::write(to[1], &c, 1) != 1 || ::read(from[0], &n, sizeof n) != sizeof n) return "(no reply)";
    std::string reply(n, '\0');
    size_t got = 0;
    for (ssize_t k; got < n && (k = ::read(from[0], &reply[got], n - got)) > 0;) got += static_cast<size_t>(k);
    return reply;
  }
  void end() {
    char c = 'q';
    (void)!::write(to[1], &c, 1);
    int status = 0;
    ::waitpid(pid, &status, 0);
    for (int fd : {to[0], to[1], from[0], from[1]}) ::close(fd);
  }
};

// Only the process the coordinator registered for a rank may attach its push segment (KvServerOptions::worker_pids,
// KvServer::worker_registered): another process of the job's user, which knows the token, is refused while the
// registered one runs, and told to retry once it has ended (a restart whose registration is on its way).
TEST(KvSharedMemory, OnlyTheProcessRegisteredForARankAttachesItsSegment) {
  const int64_t self = ::getpid();
  Job job(1, 2, Consistency::kBsp, PayloadTransport::kShm, "momentum", kTensors, kSliceBytes, {self, self});
  const size_t exact = transport::SlotTable(SliceLayout(kTensors, kSliceBytes, 1), 0).bytes();
  {
    KvClient kv(job.client(0));  // the registered process: attached, its pushes through shared memory
    for (const TensorSpec& t : kTensors) {
      std::vector<float> w(t.numel, 0.0f);
      kv.wait(kv.init(t.name, w.data(), w.size()));
    }
    std::vector<float> g(kTensors[0].numel, 1.0f), w(kTensors[0].numel, 0.0f);
    KvClientOptions o1 = job.client(1);
    KvClient kv1(o1);
    auto a = kv.push_pull(kTensors[0].name, g.data(), w.data(), w.size(), 0);
    auto b = kv1.push_pull(kTensors[0].name, g.data(), w.data(), w.size(), 0);
    kv.wait(a);
    kv1.wait(b);
    EXPECT_GT(kv.traffic().shm_bytes_sent, 0u);
  }
  Stranger stranger(job, "1", exact);
  ASSERT_GT(stranger.pid, 0);
  std::string r = stranger.ask();
  EXPECT_EQ(r.rfind("refused", 0), 0u) << r;
  EXPECT_NE(r.find("process " + std::to_string(stranger.pid) + " is not worker 1: the coordinator registered process " +
                   std::to_string(self) + " for that rank"),
            std::string::npos)
      << r;
  // The coordinator registered the other process for rank 1 (a restart): it attaches, and this one no longer may.
  job.servers[0]->worker_registered(1, stranger.pid);
  r = stranger.ask();
  EXPECT_EQ(r.rfind("ok", 0), 0u) << r;
  r = channel_request(job, "job", "1", exact, 1);
  EXPECT_NE(r.find("process " + std::to_string(self) + " is not worker 1"), std::string::npos) << r;
  // Its process ended: until the server hears of the rank's next one, every other is asked to come back.
  stranger.end();
  r = channel_request(job, "job", "1", exact, 1);
  EXPECT_EQ(r.rfind("retry", 0), 0u) << r;
  EXPECT_NE(r.find("has not heard of worker 1's registration as process " + std::to_string(self)), std::string::npos)
      << r;
  job.servers[0]->worker_registered(1, self);
  EXPECT_EQ(channel_request(job, "job", "1", exact, 1).rfind("ok", 0), 0u);
}

TEST(KvSharedMemory, ShmToAServerOnAnotherHostIsAnErrorAndAutoFallsBackToTcp) {
  // A TCP-only server has no channel: for this client it might as well be on another host.
  Job job(1, 1, Consistency::kBsp, PayloadTransport::kTcp);
  std::vector<float> w(kTensors[0].numel, 0.0f);
  {
    KvClientOptions o = job.client(0);
    o.transport = PayloadTransport::kAuto;
    KvClient kv(o);
    for (const TensorSpec& t : kTensors) {
      std::vector<float> z(t.numel, 0.0f);
      kv.wait(kv.init(t.name, z.data(), z.size()));
    }
    kv.wait(kv.zpull(kTensors[0].name, w.data(), w.size(), 0));
    kv.wait(kv.zpull(kTensors[0].name, w.data(), w.size(), 0));
    EXPECT_EQ(kv.traffic().shm_bytes_recv, 0u);
    EXPECT_GT(kv.traffic().bytes_recv, 0u);
  }
  KvClientOptions o = job.client(0);
  o.transport = PayloadTransport::kShm;
  KvClient kv(o);
  kv.wait(kv.zpull(kTensors[0].name, w.data(), w.size(), 0));   // hears from the server over TCP first
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // past the channel's next try
  try {
    kv.wait(kv.zpull(kTensors[0].name, w.data(), w.size(), 0));
    FAIL() << "cluster.transport = shm to a server without shared memory was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cluster.transport = shm, but no shared memory"), std::string::npos)
        << e.what();
  }
}

TEST(SharedSegment, AttachRefusesTruncatedAndOversizedSegmentsNamingThem) {
  transport::SharedSegment a = transport::SharedSegment::create("test", 4096);
  const int fd = ::dup(a.fd());
  try {
    transport::SharedSegment::attach(fd, 8192, "the test segment");
    FAIL() << "a truncated segment was mapped";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the test segment has 4096 bytes, the layout needs exactly 8192"),
              std::string::npos)
        << e.what();
  }
  transport::SharedSegment b = transport::SharedSegment::attach(::dup(a.fd()), 4096, "the test segment");
  std::memcpy(a.data(), "shared", 7);
  EXPECT_STREQ(reinterpret_cast<const char*>(b.data()), "shared");  // one memory, two mappings
}

// A segment is sealed against resizing from its creation: whoever it is passed to cannot truncate it under its owner
// (whose next access would fault), and an unsealed one is refused; a weights segment sealed against other writers
// maps read-only in the workers and writable nowhere else, while its owner keeps writing it.
TEST(SharedSegment, SegmentsAreSealedAgainstResizingAndWeightsAgainstOtherWriters) {
  transport::SharedSegment a = transport::SharedSegment::create("sealed", 4096);
  EXPECT_NE(::ftruncate(a.fd(), 0), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::ftruncate(a.fd(), 8192), 0);
  const int plain = ::memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_GE(plain, 0);
  ASSERT_EQ(::ftruncate(plain, 4096), 0);
  try {
    transport::SharedSegment::attach(plain, 4096, "the unsealed segment");
    FAIL() << "a segment that can be truncated was mapped";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the unsealed segment: the segment is not sealed against resizing"),
              std::string::npos)
        << e.what();
  }
  a.seal_against_other_writers();
  std::memcpy(a.data(), "owner", 6);  // the owner's mapping stays writable
  EXPECT_EQ(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, a.fd(), 0), MAP_FAILED);
  EXPECT_THROW(transport::SharedSegment::attach(::dup(a.fd()), 4096, "weights"), Error);  // writable: refused
  transport::SharedSegment reader =
      transport::SharedSegment::attach(::dup(a.fd()), 4096, "weights", transport::SharedSegment::Access::kReadOnly);
  EXPECT_STREQ(reinterpret_cast<const char*>(reader.data()), "owner");
}

TEST(SharedSegment, SlotsAreAlignedAndTheSeqlockCopiesWholeUpdates) {
  const SliceLayout layout(kTensors, kSliceBytes, 2);
  const transport::SlotTable table(layout, 1);
  transport::SharedSegment seg = transport::SharedSegment::create("slots", table.bytes());
  size_t mine = 0;
  for (uint32_t id = 0; id < layout.slices().size(); ++id) {
    transport::SlotHead* h = table.head(seg.data(), id);
    EXPECT_EQ(h != nullptr, layout.slice(id).server == 1u);
    if (h == nullptr) continue;
    ++mine;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(h) % 64, 0u);
    EXPECT_LE(reinterpret_cast<uint8_t*>(transport::SlotTable::values(h) + layout.slice(id).length),
              seg.data() + seg.size());
  }
  EXPECT_EQ(mine, table.slots());
  // A writer that keeps rewriting one slot with uniform values: every read sees one value throughout.
  uint32_t id = 0;
  while (table.head(seg.data(), id) == nullptr) ++id;
  const size_t n = layout.slice(id).length;
  transport::SlotHead* head = table.head(seg.data(), id);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::vector<float> v(n);
    for (uint64_t g = 1; !stop; ++g) {
      std::fill(v.begin(), v.end(), static_cast<float>(g));
      transport::WeightsSlot(head).write(v.data(), n, g);
    }
  });
  std::vector<float> out(n);
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(transport::WeightsSlot(head).read(out.data(), n));
    for (float x : out) ASSERT_EQ(x, out[0]);
  }
  stop = true;
  writer.join();
}

}  // namespace
}  // namespace pshard
