// Embedding tables through sockets: servers and workers in one process (threads). Two workers training a table in
// sync steps against a single-process reference of the same rows (bitwise), rows spread over the servers, bf16 on
// the wire, the rows' values through shared memory (the same bits, only the ids on a socket, a region outside the
// row segment refused), and the client's own refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <zmq.hpp>

#include "common/error.h"
#include "common/transport/frames.h"
#include "common/transport/peer_auth.h"
#include "common/transport/shm_channel.h"
#include "common/transport/shm_segment.h"
#include "server/kv/kv_server.h"
#include "worker/client/kv_client.h"

namespace pshard {
namespace {

const std::vector<TensorSpec> kDense = {{"fc.weight", 16}};
const TableSpec kTable{"items", 1000, 8, TableInit::kUniform, 0.05f};
constexpr uint64_t kSeed = 9;

struct Job {
  std::vector<std::unique_ptr<KvServer>> servers;
  std::vector<std::string> endpoints;
  transport::PayloadTransport transport;
  Job(uint32_t s, uint32_t w, const std::string& rule, float lr,
      transport::PayloadTransport t = transport::PayloadTransport::kTcp)
      : transport(t) {
    for (uint32_t r = 0; r < s; ++r) {
      KvServerOptions o;
      o.rank = r;
      o.num_servers = s;
      o.num_workers = w;
      o.job_token = "job";
      optim::OptimizerParams p;
      p.name = rule;
      p.lr = lr;
      p.eps = 1e-10f;
      o.optimizer = optim::make_optimizer(p);
      o.lr.base_lr = lr;
      o.transport = transport;
      servers.push_back(std::make_unique<KvServer>(o));
      endpoints.push_back(servers.back()->endpoint());
    }
  }
  KvClientOptions client(uint32_t rank) const {
    KvClientOptions c;
    c.rank = rank;
    c.servers = endpoints;
    c.tensors = kDense;
    c.job_token = "job";
    c.request_timeout = std::chrono::milliseconds(20000);
    c.transport = transport;
    return c;
  }
};

// The unique rows of worker `rank`'s batch at `step` (skewed towards low ids, overlapping between the workers), in
// the order the batch first meets them.
std::vector<uint64_t> batch_rows(uint32_t rank, int64_t step) {
  std::mt19937_64 rng(1000 * step + rank);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 40; ++i) {
    const uint64_t id = static_cast<uint64_t>(std::pow(std::uniform_real_distribution<double>(0, 1)(rng), 3) * 1000);
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

float grad_value(uint32_t rank, int64_t step, uint64_t row, uint32_t col, float w) {
  return w * (1.0f + 0.5f * rank) + 0.01f * std::sin(0.3f * row + 0.7f * col + 0.1f * step);
}

// W workers for `steps` sync steps: each pulls its batch's rows, pushes a gradient that depends on the values it
// read. Returns every row of the table at the end as worker 0 reads it.
std::vector<float> train(uint32_t servers, uint32_t workers, const std::string& rule, int64_t steps, bool bf16 = false,
                         transport::PayloadTransport via = transport::PayloadTransport::kTcp,
                         KvTraffic* traffic0 = nullptr) {
  Job job(servers, workers, rule, 0.1f, via);
  std::vector<std::thread> threads;
  std::vector<float> final_rows;
  for (uint32_t w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      KvClientOptions o = job.client(w);
      if (bf16) o.compression.push = o.compression.pull = protocol::Encoding::BF16;
      KvClient kv(o);
      kv.wait(kv.declare_tables({kTable}, kSeed));
      for (int64_t t = 0; t < steps; ++t) {
        const std::vector<uint64_t> ids = batch_rows(w, t);
        std::vector<float> rows(ids.size() * kTable.dim), grads(rows.size());
        kv.wait(kv.row_pull(0, ids.data(), ids.size(), rows.data(), t));
        for (size_t i = 0; i < ids.size(); ++i) {
          for (uint32_t c = 0; c < kTable.dim; ++c) {
            grads[i * kTable.dim + c] = grad_value(w, t, ids[i], c, rows[i * kTable.dim + c]);
          }
        }
        kv.wait(kv.row_push(0, ids.data(), ids.size(), grads.data(), t));
      }
      if (w == 0) {
        std::vector<uint64_t> all(kTable.rows);
        for (uint64_t r = 0; r < kTable.rows; ++r) all[r] = r;
        final_rows.resize(kTable.rows * kTable.dim);
        kv.wait(kv.row_pull(0, all.data(), all.size(), final_rows.data(), steps));
        if (traffic0) *traffic0 = kv.traffic();
      }
    });
  }
  for (auto& t : threads) t.join();
  return final_rows;
}

// The same steps in one process: the rows each worker pushed summed in rank order, divided by W, one update per row.
std::vector<float> reference(uint32_t workers, const std::string& rule, int64_t steps) {
  optim::OptimizerParams p;
  p.name = rule;
  p.lr = 0.1f;
  p.eps = 1e-10f;
  auto opt = optim::make_optimizer(p);
  const uint32_t dim = kTable.dim;
  std::vector<float> table(kTable.rows * dim), state(kTable.rows * dim * opt->state_floats(), 0.0f);
  for (uint64_t r = 0; r < kTable.rows; ++r) table_initial_row(kTable, kSeed, r, table.data() + r * dim);
  for (int64_t t = 0; t < steps; ++t) {
    std::map<uint64_t, std::vector<float>> sums;
    for (uint32_t w = 0; w < workers; ++w) {
      for (uint64_t id : batch_rows(w, t)) {
        std::vector<float> g(dim);
        for (uint32_t c = 0; c < dim; ++c) g[c] = grad_value(w, t, id, c, table[id * dim + c]);
        auto [it, fresh] = sums.emplace(id, g);
        if (!fresh) {
          for (uint32_t c = 0; c < dim; ++c) it->second[c] += g[c];
        }
      }
    }
    for (auto& [id, g] : sums) {
      for (float& x : g) x /= static_cast<float>(workers);
      opt->apply(table.data() + id * dim, g.data(), state.data() + id * dim * opt->state_floats(), dim, 0.1f, t + 1);
    }
  }
  return table;
}

TEST(TableRows, TwoWorkersInSyncStepsMatchOneProcessBitwise) {
  for (const std::string rule : {"sgd", "adagrad", "adam"}) {
    const std::vector<float> got = train(2, 2, rule, 12);
    const std::vector<float> want = reference(2, rule, 12);
    ASSERT_EQ(got.size(), want.size());
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
    EXPECT_EQ(differ, 0u) << rule;
    EXPECT_NE(want, reference(2, rule, 0)) << "the steps changed the table";
  }
}

TEST(TableRows, TheRowsAreTheSameOnOneServerAsOnThree) {
  EXPECT_EQ(train(1, 2, "adagrad", 6), train(3, 2, "adagrad", 6));
}

TEST(TableRows, Bf16OnTheWireStaysNearFloat32) {
  const std::vector<float> bf = train(2, 2, "sgd", 6, true), fp = train(2, 2, "sgd", 6);
  double worst = 0;
  for (size_t i = 0; i < bf.size(); ++i) worst = std::max(worst, double(std::abs(bf[i] - fp[i])));
  EXPECT_GT(worst, 0.0);
  EXPECT_LT(worst, 2e-3);
}

TEST(TableRows, ThroughSharedMemoryTheRowsAreTheBitsOfTcpWithOnlyTheIdsOnASocket) {
  KvTraffic shm, tcp;
  const std::vector<float> got = train(2, 2, "adagrad", 8, false, transport::PayloadTransport::kShm, &shm);
  EXPECT_EQ(got, train(2, 2, "adagrad", 8, false, transport::PayloadTransport::kTcp, &tcp));
  EXPECT_EQ(got, reference(2, "adagrad", 8));
  uint64_t rows = 0;  // worker 0's rows over the steps: pulled once and pushed once each
  for (int64_t t = 0; t < 8; ++t) rows += batch_rows(0, t).size();
  const uint64_t row_bytes = kTable.dim * sizeof(float);
  EXPECT_EQ(shm.shm_bytes_sent, rows * row_bytes);
  EXPECT_EQ(shm.shm_bytes_recv, (rows + kTable.rows) * row_bytes);         // and the final read of the whole table
  EXPECT_EQ(shm.bytes_sent, (2 * rows + kTable.rows) * sizeof(uint64_t));  // the ids
  EXPECT_EQ(shm.bytes_recv, 0u);
  EXPECT_EQ(tcp.shm_bytes_sent + tcp.shm_bytes_recv, 0u);
  EXPECT_EQ(tcp.bytes_recv, (rows + kTable.rows) * row_bytes);
}

TEST(TableRows, TheServerWritesPulledRowsIntoTheRowSegmentAndRefusesRegionsOutsideIt) {
  Job job(1, 1, "sgd", 0.1f, transport::PayloadTransport::kShm);
  {
    KvClient kv(job.client(0));
    kv.wait(kv.declare_tables({kTable}, kSeed));
  }
  // Worker 0's row segment, handed over as a worker does (ServerLinks::row_region).
  transport::SharedSegment rows = transport::SharedSegment::create("test rows", 4096);
  std::string reply, error;
  int fd = -1;
  ASSERT_TRUE(transport::shm_channel_call(transport::shm_channel_address("job", job.endpoints[0]),
                                          "token job\nrank 0\nrows 4096\n", rows.fd(), &reply, &fd,
                                          std::chrono::milliseconds(5000), &error))
      << error;
  EXPECT_EQ(reply, "ok\n4096");
  zmq::context_t ctx;
  zmq::socket_t sock(ctx, zmq::socket_type::dealer);
  sock.set(zmq::sockopt::rcvtimeo, 5000);
  sock.set(zmq::sockopt::linger, 0);
  transport::apply_client_auth(sock, {}, "job");
  sock.connect(job.endpoints[0]);
  // A rowPull of rows 3 and 7 (2 x 8 floats = 64 bytes) with the values at `offset`: the decoded reply.
  uint64_t next_id = 1;
  auto pull = [&](uint64_t offset) {
    protocol::Message m;
    m.type = protocol::MessageType::ROW_PULL;
    m.request_id = next_id++;
    m.job_token = "job";
    m.sender_role = protocol::Role::WORKER;
    m.shared_memory = true;
    m.row_offset = offset;
    const uint64_t ids[] = {3, 7};
    std::vector<zmq::message_t> frames;
    frames.push_back(transport::copy_frame(protocol::encode_header(m)));
    frames.emplace_back(ids, sizeof ids);
    for (size_t i = 0; i < frames.size(); ++i) {
      sock.send(frames[i], i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
    std::vector<zmq::message_t> got;
    do {
      got.emplace_back();
      EXPECT_TRUE(sock.recv(got.back()));
    } while (got.back().more());
    std::vector<protocol::FrameView> views;
    for (const auto& f : got) views.push_back({f.data(), f.size()});
    protocol::Decoded d = protocol::decode(views.data(), views.size());
    EXPECT_TRUE(d.ok) << d.error;
    EXPECT_TRUE(d.message.payloads.empty());  // the rows are not on the socket
    return d.message;
  };
  const protocol::Message outside = pull(4096 - 32);
  EXPECT_EQ(outside.type, protocol::MessageType::ERROR);
  EXPECT_NE(
      outside.error_message.find("rows at offset 4064 (64 bytes) are outside worker 0's row segment (4096 bytes)"),
      std::string::npos)
      << outside.error_message;
  const protocol::Message inside = pull(1024);
  ASSERT_EQ(inside.type, protocol::MessageType::ROWS) << inside.error_message;
  EXPECT_TRUE(inside.shared_memory);
  std::vector<float> want(2 * kTable.dim), there(2 * kTable.dim);
  table_initial_row(kTable, kSeed, 3, want.data());
  table_initial_row(kTable, kSeed, 7, want.data() + kTable.dim);
  std::memcpy(there.data(), rows.data() + 1024, there.size() * sizeof(float));
  EXPECT_EQ(there, want);
}

TEST(TableRows, TheClientRefusesRowsOutsideTheTableAndRepeatedRows) {
  Job job(2, 1, "sgd", 0.1f);
  KvClient kv(job.client(0));
  const uint64_t bad[] = {3, 1000};
  float out[16];
  EXPECT_THROW(kv.row_pull(0, bad, 2, out, 0), Error);  // no tables declared yet
  kv.wait(kv.declare_tables({kTable}, kSeed));
  try {
    kv.row_pull(0, bad, 2, out, 0);
    FAIL() << "row 1000 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 1000 is outside embedding table items (1000 x 8)"), std::string::npos)
        << e.what();
  }
  const uint64_t twice[] = {5, 5};
  EXPECT_THROW(kv.row_pull(0, twice, 2, out, 0), Error);
  // A push of a row this worker did not pull comes back as the server's refusal.
  const uint64_t seven[] = {7};
  std::vector<float> g(8, 1.0f);
  try {
    kv.wait(kv.row_push(0, seven, 1, g.data(), 0));
    FAIL() << "a push of a row not pulled was accepted";
  } catch (const KvError& e) {
    EXPECT_EQ(e.code(), protocol::ErrorCode::ROW_NOT_PULLED);
    EXPECT_NE(std::string(e.what()).find("table items, step 0 from worker 0: row 7 was not pulled"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace pshard
