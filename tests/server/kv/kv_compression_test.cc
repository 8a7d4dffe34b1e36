// Compressed pushes and pulls between KvClients and KvServers in one process: the servers aggregate the decoded
// gradients in float32 and keep float32 master weights, error feedback delivers every gradient in the end, and the
// clients count the bytes that really went on the wire.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "common/compression/codec.h"
#include "server/kv/kv_server.h"
#include "worker/client/kv_client.h"

namespace pshard {
namespace {

using compression::Encoding;

// "w" is cut into slices of 256, 256, 256, 232 floats over 2 servers; "b" (40 bytes) stays under min_bytes.
const std::vector<TensorSpec> kTensors = {{"w", 1000}, {"b", 10}};
constexpr uint64_t kSliceBytes = 1024;

struct Job {
  std::vector<std::unique_ptr<KvServer>> servers;
  std::vector<std::string> endpoints;

  Job(uint32_t num_servers, uint32_t num_workers) {
    for (uint32_t r = 0; r < num_servers; ++r) {
      KvServerOptions o;
      o.rank = r;
      o.num_servers = num_servers;
      o.num_workers = num_workers;
      o.job_token = "job";
      o.slice_bytes = kSliceBytes;
      o.optimizer = optim::make_optimizer(optim::OptimizerParams{});  // sgd
      o.lr_at = [](int64_t) { return 1.0f; };                         // w -= g exactly
      servers.push_back(std::make_unique<KvServer>(o));
      endpoints.push_back(servers.back()->endpoint());
    }
  }
  std::unique_ptr<KvClient> client(uint32_t rank, compression::Settings c) const {
    KvClientOptions o;
    o.rank = rank;
    o.servers = endpoints;
    o.tensors = kTensors;
    o.slice_bytes = kSliceBytes;
    o.job_token = "job";
    o.request_timeout = std::chrono::milliseconds(20000);
    o.compression = c;
    return std::make_unique<KvClient>(o);
  }
};

compression::Settings settings(Encoding push, Encoding pull, double ratio = 0.01) {
  compression::Settings s;
  s.push = push;
  s.pull = pull;
  s.ratio = ratio;
  s.min_bytes = 100;
  return s;
}

std::vector<float> pattern(size_t n, float a, float b) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = a * std::sin(b * static_cast<float>(i) + 0.3f);
  return v;
}

std::vector<float> coded(Encoding e, const std::vector<float>& v) {
  auto c = compression::make_codec({e});
  std::vector<uint8_t> bytes(c->max_encoded_bytes(v.size()));
  c->encode(v.data(), v.size(), bytes.data());
  std::vector<float> out(v.size());
  c->decode(bytes.data(), bytes.size(), v.size(), out.data());
  return out;
}

TEST(KvCompression, ServersAggregateDecodedGradientsInFloat32AndKeepFloat32Weights) {
  Job job(2, 2);
  auto w0 = job.client(0, settings(Encoding::BF16, Encoding::BF16));
  auto w1 = job.client(1, settings(Encoding::FP16, Encoding::FP16));
  const std::vector<float> init = pattern(1000, 1.0f, 0.01f), bias = pattern(10, 0.5f, 1.0f);
  w0->wait(w0->init("w", init.data(), init.size()));
  w0->wait(w0->init("b", bias.data(), bias.size()));
  const std::vector<float> g0 = pattern(1000, 0.01f, 0.37f), g1 = pattern(1000, 0.02f, 0.11f);
  std::vector<float> got0(1000), got1(1000);
  auto h0 = w0->push_pull("w", g0.data(), got0.data(), 1000, 0);
  auto h1 = w1->push_pull("w", g1.data(), got1.data(), 1000, 0);
  w0->wait(h0);
  w1->wait(h1);

  // What the servers hold: w - (bf16(g0) + fp16(g1)) / 2, in float32 (read back by a float32 client).
  const std::vector<float> d0 = coded(Encoding::BF16, g0), d1 = coded(Encoding::FP16, g1);
  std::vector<float> master(1000);
  for (size_t i = 0; i < 1000; ++i) master[i] = init[i] - (d0[i] + d1[i]) / 2.0f;
  auto reader = job.client(0, settings(Encoding::NONE, Encoding::NONE));
  std::vector<float> exact;
  reader->wait(reader->pull("w", &exact, 1));
  EXPECT_EQ(exact, master);
  // Each worker read the same master weights in its own pull precision.
  EXPECT_EQ(got0, coded(Encoding::BF16, master));
  EXPECT_EQ(got1, coded(Encoding::FP16, master));
  EXPECT_NE(got0, master);  // (bf16 really rounded something)
}

TEST(KvCompression, BytesOnTheWireAreMeasuredPerEncoding) {
  Job job(2, 1);
  auto kv = job.client(0, settings(Encoding::BF16, Encoding::BF16));
  const std::vector<float> init = pattern(1000, 1.0f, 0.01f), bias = pattern(10, 0.5f, 1.0f);
  kv->wait(kv->init("w", init.data(), init.size()));
  kv->wait(kv->init("b", bias.data(), bias.size()));
  const KvTraffic start = kv->traffic();
  EXPECT_EQ(start.bytes_sent, 4040u);  // init is float32
  EXPECT_EQ(start.fp32_bytes_sent, 4040u);
  std::vector<float> g = pattern(1000, 0.01f, 0.3f), out(1000), gb = pattern(10, 0.1f, 0.3f), outb(10);
  kv->wait(kv->push_pull("w", g.data(), out.data(), 1000, 0));
  kv->wait(kv->push_pull("b", gb.data(), outb.data(), 10, 0));
  KvTraffic t = kv->traffic();
  EXPECT_EQ(t.bytes_sent - start.bytes_sent, 2000u + 40u);  // bf16 weight gradient, float32 bias (< min_bytes)
  EXPECT_EQ(t.bytes_recv - start.bytes_recv, 2000u + 40u);
  EXPECT_EQ(t.fp32_bytes_sent - start.fp32_bytes_sent, 4040u);
  EXPECT_EQ(t.fp32_bytes_recv - start.fp32_bytes_recv, 4040u);

  auto sparse = job.client(0, settings(Encoding::TOPK, Encoding::NONE, 0.1));
  sparse->wait(sparse->push("w", g.data(), 1000, 1));
  // ceil(0.1 x {256, 256, 256, 232}) = 26 + 26 + 26 + 24 indices and values of 8 bytes.
  EXPECT_EQ(sparse->traffic().bytes_sent, 102u * 8);
  EXPECT_EQ(sparse->traffic().fp32_bytes_sent, 4000u);
}

TEST(KvCompression, TopkWithErrorFeedbackDeliversEveryGradientInTheEnd) {
  Job job(2, 1);
  auto kv = job.client(0, settings(Encoding::TOPK, Encoding::NONE, 0.1));
  const std::vector<float> init(1000, 0.0f), bias(10, 0.0f);
  kv->wait(kv->init("w", init.data(), init.size()));
  kv->wait(kv->init("b", bias.data(), bias.size()));
  // 20 steps of gradients, then 10 of zeros: each zero step sends the 10 % largest of what is left, exactly.
  std::vector<double> sum(1000, 0.0);
  std::vector<float> out(1000);
  for (int64_t t = 0; t < 30; ++t) {
    const std::vector<float> g = t < 20 ? pattern(1000, 0.01f, 0.1f * static_cast<float>(t + 1)) : init;
    for (size_t i = 0; i < 1000; ++i) sum[i] += g[i];
    kv->wait(kv->push_pull("w", g.data(), out.data(), 1000, t));
  }
  double worst = 0;
  for (size_t i = 0; i < 1000; ++i) worst = std::max(worst, std::fabs(-sum[i] - out[i]));
  EXPECT_LT(worst, 1e-6);  // sgd, lr 1: the weights are minus everything pushed
}

}  // namespace
}  // namespace pshard
