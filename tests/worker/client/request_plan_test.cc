// plan_request: each slice of a request to its server by one route (TCP copy, borrowed, encoded, shared memory on the
// caller's thread or the copier's, a host's member or leader), decided without sockets.
#include "worker/client/request_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace pshard {
namespace {

using protocol::Encoding;
using protocol::MessageType;

constexpr uint64_t kSliceBytes = 256u << 10;
constexpr uint64_t kSliceFloats = kSliceBytes / sizeof(float);

// Five full slices of 256 KiB and one of 400 bytes, over two servers.
SliceLayout two_servers() { return SliceLayout({{"w", 5 * kSliceFloats + 100}, {"b", 10}}, kSliceBytes, 2); }

std::vector<std::string> routes(const PlannedPart& p) {
  std::vector<std::string> names;
  for (SliceRoute r : p.routes) names.push_back(route_name(r));
  return names;
}

// The routes a plan gives each slice of a part whose slices are all full (256 KiB) but the small last one.
std::vector<std::string> expected(const SliceLayout& layout, const PlannedPart& p, const std::string& full,
                                  const std::string& small) {
  std::vector<std::string> names;
  for (uint32_t id : p.ids) names.push_back(layout.slice(id).length == kSliceFloats ? full : small);
  return names;
}

struct Asked {
  std::vector<uint32_t> servers;
  std::vector<bool> answer{true, true};
  std::function<bool(uint32_t)> callback() {
    return [this](uint32_t s) {
      servers.push_back(s);
      return answer[s];
    };
  }
};

TEST(RequestPlan, APartPerServerInServerOrderHoldingThatServersSlices) {
  const SliceLayout layout = two_servers();
  Asked asked;
  RequestPlanInputs in;
  in.type = MessageType::PULL;
  in.shared_memory_to = asked.callback();
  const std::vector<PlannedPart> plan = plan_request(layout, layout.tensor_id("w"), in);
  ASSERT_EQ(plan.size(), 2u);
  size_t slices = 0;
  for (uint32_t s = 0; s < 2; ++s) {
    EXPECT_EQ(plan[s].server, s);
    EXPECT_EQ(plan[s].type, MessageType::PULL);
    EXPECT_EQ(plan[s].role, PartRole::kOwn);
    EXPECT_TRUE(plan[s].shared_memory);
    ASSERT_EQ(plan[s].routes.size(), plan[s].ids.size());
    for (size_t k = 0; k < plan[s].ids.size(); ++k) {
      EXPECT_EQ(layout.slice(plan[s].ids[k]).server, s);
      EXPECT_EQ(plan[s].routes[k], SliceRoute::kNoPayload);
      if (k > 0) {
        EXPECT_LT(plan[s].ids[k - 1], plan[s].ids[k]);
      }
    }
    slices += plan[s].ids.size();
  }
  EXPECT_EQ(slices, 6u);
  EXPECT_EQ(asked.servers, (std::vector<uint32_t>{0, 1}));
  // A tensor on one server: one part, and only that server is asked.
  asked.servers.clear();
  EXPECT_EQ(plan_request(layout, layout.tensor_id("b"), in).size(), 1u);
  EXPECT_EQ(asked.servers.size(), 1u);
}

TEST(RequestPlan, OverTcpAPushIsCopiedAZpushBorrowedAndACompressedPushEncoded) {
  const SliceLayout layout = two_servers();
  Asked asked;
  asked.answer = {false, false};  // the servers are on other hosts
  RequestPlanInputs in;
  in.type = MessageType::PUSH_PULL;
  in.shared_memory_to = asked.callback();
  for (const PlannedPart& p : plan_request(layout, 0, in)) {
    EXPECT_FALSE(p.shared_memory);
    EXPECT_EQ(routes(p), expected(layout, p, "tcp-copy", "tcp-copy"));
  }
  in.copy = false;
  for (const PlannedPart& p : plan_request(layout, 0, in)) {
    EXPECT_EQ(routes(p), expected(layout, p, "tcp-borrowed", "tcp-borrowed"));
  }
  EXPECT_EQ(asked.servers.size(), 4u);
  asked.servers.clear();
  asked.answer = {true, true};
  in.push_encoding = Encoding::TOPK;  // encoded pushes never use shared memory: nobody is asked
  for (const PlannedPart& p : plan_request(layout, 0, in)) {
    EXPECT_FALSE(p.shared_memory);
    EXPECT_EQ(routes(p), expected(layout, p, "tcp-encoded", "tcp-encoded"));
  }
  EXPECT_TRUE(asked.servers.empty());
}

TEST(RequestPlan, SharedMemoryCopiesLargeZpushSlicesOnTheCopierAndTheRestOnTheCallersThread) {
  const SliceLayout layout = two_servers();
  Asked asked;
  RequestPlanInputs in;
  in.type = MessageType::PUSH;
  in.copy = false;
  in.shared_memory_to = asked.callback();
  bool small_seen = false;
  for (const PlannedPart& p : plan_request(layout, 0, in)) {
    EXPECT_TRUE(p.shared_memory);
    EXPECT_EQ(routes(p), expected(layout, p, "shm-copier", "shm-inline"));
    for (uint32_t id : p.ids) small_seen = small_seen || layout.slice(id).length < kSliceFloats;
  }
  EXPECT_TRUE(small_seen);
  in.copier_min_bytes = kSliceBytes;  // up to the bound, inline
  for (const PlannedPart& p : plan_request(layout, 0, in)) {
    EXPECT_EQ(routes(p), expected(layout, p, "shm-inline", "shm-inline"));
  }
  in.copier_min_bytes = 64u << 10;
  in.copy = true;  // push(): the caller reuses its buffer at once, so the copy is made before the call returns
  for (const PlannedPart& p : plan_request(layout, 0, in)) {
    EXPECT_EQ(routes(p), expected(layout, p, "shm-inline", "shm-inline"));
  }
  // One server on this host, one not: each part its own way.
  asked.answer = {true, false};
  const std::vector<PlannedPart> mixed = plan_request(layout, 0, in);
  EXPECT_TRUE(mixed[0].shared_memory);
  EXPECT_EQ(routes(mixed[0]), expected(layout, mixed[0], "shm-inline", "shm-inline"));
  EXPECT_FALSE(mixed[1].shared_memory);
  EXPECT_EQ(routes(mixed[1]), expected(layout, mixed[1], "tcp-copy", "tcp-copy"));
}

TEST(RequestPlan, InitAndEncodedRepliesGoOverTcp) {
  const SliceLayout layout = two_servers();
  Asked asked;
  RequestPlanInputs in;
  in.type = MessageType::INIT;
  in.shared_memory_to = asked.callback();
  for (const PlannedPart& p : plan_request(layout, 0, in)) {
    EXPECT_FALSE(p.shared_memory);
    EXPECT_EQ(routes(p), expected(layout, p, "tcp-copy", "tcp-copy"));
  }
  in.type = MessageType::PULL;
  in.pull_encoding = Encoding::BF16;  // bf16 weights come back in frames
  for (const PlannedPart& p : plan_request(layout, 0, in)) EXPECT_FALSE(p.shared_memory);
  EXPECT_TRUE(asked.servers.empty());
}

TEST(RequestPlan, HostAggregationPushesThroughTheLeaderToTheServersItCovers) {
  const SliceLayout layout = two_servers();
  Asked asked;
  RequestPlanInputs in;
  in.type = MessageType::PUSH;
  in.copy = false;
  const std::vector<char> aggregated{1, 0};  // server 0 is on another host, server 1 on this one
  in.host_aggregated = &aggregated;
  in.shared_memory_to = asked.callback();
  // A member hands server 0's slices to its leader and sends server 1's itself; only server 1 is asked.
  std::vector<PlannedPart> plan = plan_request(layout, 0, in);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].role, PartRole::kHostMember);
  EXPECT_EQ(plan[0].type, MessageType::PUSH);
  EXPECT_FALSE(plan[0].shared_memory);
  EXPECT_EQ(routes(plan[0]), expected(layout, plan[0], "to-leader", "to-leader"));
  EXPECT_EQ(plan[1].role, PartRole::kOwn);
  EXPECT_EQ(routes(plan[1]), expected(layout, plan[1], "shm-copier", "shm-inline"));
  EXPECT_EQ(asked.servers, (std::vector<uint32_t>{1}));
  // The leader pushes for the host and reads the weights back for the members: a push_pull whatever was asked.
  in.host_leader = true;
  asked.answer = {false, true};
  plan = plan_request(layout, 0, in);
  EXPECT_EQ(plan[0].role, PartRole::kHostLeader);
  EXPECT_EQ(plan[0].type, MessageType::PUSH_PULL);
  EXPECT_FALSE(plan[0].shared_memory);
  EXPECT_EQ(routes(plan[0]), expected(layout, plan[0], "host-sum", "host-sum"));
  EXPECT_EQ(plan[1].role, PartRole::kOwn);
  EXPECT_EQ(plan[1].type, MessageType::PUSH);
  // Reads are each worker's own.
  in.type = MessageType::PULL;
  for (const PlannedPart& p : plan_request(layout, 0, in)) {
    EXPECT_EQ(p.role, PartRole::kOwn);
    EXPECT_EQ(p.type, MessageType::PULL);
  }
}

TEST(RequestPlan, StreamsSpreadEachServersBytesEvenlyOverItsConnections) {
  // Ten tensors of 1..10 slices' worth over two servers, three connections each.
  std::vector<TensorSpec> tensors;
  for (uint64_t i = 1; i <= 10; ++i) tensors.push_back({"t" + std::to_string(i), i * kSliceFloats / 2});
  const SliceLayout layout(tensors, kSliceBytes, 2);
  EXPECT_EQ(assign_streams(layout, 1), std::vector<uint32_t>(layout.slices().size(), 0));
  const std::vector<uint32_t> stream_of = assign_streams(layout, 3);
  ASSERT_EQ(stream_of.size(), layout.slices().size());
  for (uint32_t server = 0; server < 2; ++server) {
    std::vector<uint64_t> bytes(3, 0);
    uint64_t largest = 0;
    for (uint32_t id = 0; id < stream_of.size(); ++id) {
      const SliceInfo& s = layout.slice(id);
      if (s.server != server) continue;
      ASSERT_LT(stream_of[id], 3u);
      bytes[stream_of[id]] += s.length * sizeof(float);
      largest = std::max<uint64_t>(largest, s.length * sizeof(float));
    }
    const auto [lo, hi] = std::minmax_element(bytes.begin(), bytes.end());
    EXPECT_GT(*lo, 0u);
    EXPECT_LE(*hi - *lo, largest) << "server " << server << ": connections unbalanced by more than one slice";
  }
}

TEST(RequestPlan, SeveralStreamsCutATcpPartByConnectionAndLeaveSharedMemoryAndHostPartsWhole) {
  const SliceLayout layout = two_servers();
  const std::vector<uint32_t> stream_of = assign_streams(layout, 2);
  Asked asked;
  asked.answer = {false, false};  // the servers are on other hosts
  RequestPlanInputs in;
  in.type = MessageType::PUSH_PULL;
  in.copy = false;
  in.stream_of = &stream_of;
  in.shared_memory_to = asked.callback();
  const std::vector<PlannedPart> plan = plan_request(layout, layout.tensor_id("w"), in);
  // Six slices over two servers, each server's on its two connections: every slice once, in slice order within its
  // part, on its connection; parts in server order, then connection order.
  std::vector<uint32_t> seen;
  int64_t last_key = -1;
  for (const PlannedPart& p : plan) {
    EXPECT_EQ(p.role, PartRole::kOwn);
    EXPECT_EQ(p.type, MessageType::PUSH_PULL);
    const int64_t key = p.server * 2 + p.stream;
    EXPECT_GT(key, last_key);
    last_key = key;
    EXPECT_EQ(routes(p), expected(layout, p, "tcp-borrowed", "tcp-borrowed"));
    for (size_t k = 0; k < p.ids.size(); ++k) {
      EXPECT_EQ(layout.slice(p.ids[k]).server, p.server);
      EXPECT_EQ(stream_of[p.ids[k]], p.stream);
      if (k > 0) {
        EXPECT_LT(p.ids[k - 1], p.ids[k]);
      }
      seen.push_back(p.ids[k]);
    }
  }
  EXPECT_EQ(plan.size(), 4u) << "each server's three slices on both of its connections";
  EXPECT_EQ(seen.size(), 6u);
  // Through shared memory, and a host's leader: one part per server, on connection 0.
  asked.answer = {true, true};
  for (const PlannedPart& p : plan_request(layout, layout.tensor_id("w"), in)) {
    EXPECT_TRUE(p.shared_memory);
    EXPECT_EQ(p.stream, 0u);
  }
  const std::vector<char> aggregated{1, 1};
  in.host_aggregated = &aggregated;
  in.host_leader = true;
  const std::vector<PlannedPart> leader = plan_request(layout, layout.tensor_id("w"), in);
  ASSERT_EQ(leader.size(), 2u);
  for (const PlannedPart& p : leader) EXPECT_EQ(p.stream, 0u);
}

}  // namespace
}  // namespace pshard
