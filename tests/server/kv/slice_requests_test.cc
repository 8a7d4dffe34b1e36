// A slice's request path without sockets: init, push, pull, join, dead workers and stalled reads in, the requests
// it finished out (BSP with two workers, sgd with learning rate 1).
#include "server/kv/slice_requests.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/keys/slice_layout.h"
#include "optim/optimizer.h"
#include "server/kv/slice_store.h"

namespace pshard {
namespace {

using protocol::ErrorCode;
using protocol::MessageType;

constexpr uint64_t kLength = 4;

KvServerOptions options() {
  KvServerOptions o;
  o.num_workers = 2;
  o.mode = Consistency::kBsp;
  optim::OptimizerParams p;
  p.name = "sgd";
  p.lr = 1.0f;
  o.optimizer = optim::make_optimizer(p);
  o.lr_at = [](int64_t) { return 1.0f; };
  return o;
}

// One slice "w" of kLength floats, and the socket-less thread that owns it.
struct ASlice : ::testing::Test {
  KvServerOptions opt = options();
  SliceStore store{opt, 0};
  std::vector<char> dead = std::vector<char>(2, 0);
  std::vector<float> scratch;
  SliceThread here{dead, scratch};

  void SetUp() override {
    const std::vector<TensorSpec> tensors = {{"w", kLength}};
    protocol::ErrorCode code = protocol::ErrorCode::NONE;
    std::string why;
    ASSERT_TRUE(store.install(tensors, SliceLayout(tensors, opt.slice_bytes, 1).fingerprint(), 0, code, why)) << why;
    ASSERT_EQ(store.size(), 1u);
  }
  Slice& slice() { return *store.slice(0); }

  // A request of worker `rank` for the slice, with `values` as its payload when given.
  static RequestPtr request(MessageType type, uint32_t rank, int64_t step, const std::vector<float>& values = {}) {
    auto r = std::make_shared<Request>();
    r->msg.type = type;
    r->msg.sender_rank = rank;
    r->msg.step = step;
    r->msg.keys.push_back({0, 0, 0, kLength});
    r->slice_ids = {0};
    if (!values.empty()) {
      auto frame = std::make_shared<zmq::message_t>(values.size() * sizeof(float));
      std::memcpy(frame->data(), values.data(), frame->size());
      r->payloads.push_back(std::move(frame));
    }
    r->replies.resize(1);
    r->remaining = 1;
    return r;
  }
  std::vector<RequestPtr> run(const RequestPtr& r) { return slice().requests.run(r, 0, here); }
  std::vector<RequestPtr> worker_dead(uint32_t rank) {
    dead[rank] = 1;
    return slice().requests.worker_dead(rank, here);
  }
  void init(const std::vector<float>& w) { ASSERT_EQ(run(request(MessageType::INIT, 0, 0, w)).size(), 1u); }

  static std::vector<float> reply(const RequestPtr& r) {
    const zmq::message_t& m = r->replies[0];
    std::vector<float> v(m.size() / sizeof(float));
    std::memcpy(v.data(), m.data(), m.size());
    return v;
  }
};

TEST_F(ASlice, APullWaitsUntilEveryLiveWorkerPushedThenGetsTheUpdatedWeights) {
  init({1, 2, 3, 4});
  RequestPtr pull = request(MessageType::PULL, 1, 1);
  EXPECT_TRUE(run(pull).empty());
  EXPECT_EQ(slice().requests.waiting(), 1u);

  RequestPtr push0 = request(MessageType::PUSH, 0, 0, {1, 1, 1, 1});
  std::vector<RequestPtr> done = run(push0);
  ASSERT_EQ(done.size(), 1u);  // acknowledged; the step waits for worker 1
  EXPECT_EQ(done[0], push0);
  EXPECT_EQ(slice().requests.waiting(), 1u);

  RequestPtr push1 = request(MessageType::PUSH, 1, 0, {3, 3, 3, 3});
  done = run(push1);
  ASSERT_EQ(done.size(), 2u);  // the released pull first, then the push that released it
  EXPECT_EQ(done[0], pull);
  EXPECT_EQ(done[1], push1);
  EXPECT_EQ(pull->error, ErrorCode::NONE);
  EXPECT_EQ(reply(pull), (std::vector<float>{-1, 0, 1, 2}));  // minus the mean gradient, 2
  EXPECT_EQ(slice().version(), 1);
  EXPECT_EQ(slice().requests.waiting(), 0u);
}

TEST_F(ASlice, APushPullIsAnsweredWhenItsStepCloses) {
  init({0, 0, 0, 0});
  RequestPtr pp0 = request(MessageType::PUSH_PULL, 0, 0, {2, 2, 2, 2});
  EXPECT_TRUE(run(pp0).empty());
  RequestPtr pp1 = request(MessageType::PUSH_PULL, 1, 0, {4, 4, 4, 4});
  std::vector<RequestPtr> done = run(pp1);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0], pp0);
  EXPECT_EQ(done[1], pp1);
  EXPECT_EQ(reply(pp0), (std::vector<float>{-3, -3, -3, -3}));
  EXPECT_EQ(reply(pp1), reply(pp0));
}

TEST_F(ASlice, AnOutOfOrderPushIsHeldUntilTheLowerRankPushes) {
  init({0, 0, 0, 0});
  RequestPtr push1 = request(MessageType::PUSH, 1, 0, {4, 4, 4, 4});
  ASSERT_EQ(run(push1).size(), 1u);
  EXPECT_EQ(slice().version(), 0);             // held: worker 0 has not pushed
  EXPECT_TRUE(push1->payloads[0] == nullptr);  // the policy keeps the gradient, not the request
  ASSERT_EQ(run(request(MessageType::PUSH, 0, 0, {2, 2, 2, 2})).size(), 1u);
  EXPECT_EQ(slice().version(), 1);
  RequestPtr pull = request(MessageType::PULL, 0, 1);
  ASSERT_EQ(run(pull).size(), 1u);
  EXPECT_EQ(reply(pull), (std::vector<float>{-3, -3, -3, -3}));
}

TEST_F(ASlice, AWorkerDeathReleasesAWaitingPull) {
  init({1, 1, 1, 1});
  ASSERT_EQ(run(request(MessageType::PUSH, 0, 0, {2, 2, 2, 2})).size(), 1u);
  RequestPtr pull = request(MessageType::PULL, 0, 1);
  EXPECT_TRUE(run(pull).empty());
  std::vector<RequestPtr> done = worker_dead(1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0], pull);
  EXPECT_EQ(reply(pull), (std::vector<float>{-1, -1, -1, -1}));  // worker 0's gradient alone
  // Its pushes are refused from now on.
  RequestPtr late = request(MessageType::PUSH, 1, 1, {1, 1, 1, 1});
  ASSERT_EQ(run(late).size(), 1u);
  EXPECT_EQ(late->error, ErrorCode::WORKER_DEAD);
}

TEST_F(ASlice, ARejoinedWorkerIsAnsweredAndCountsAgainFromItsJoinStep) {
  init({0, 0, 0, 0});
  EXPECT_TRUE(worker_dead(1).empty());
  ASSERT_EQ(run(request(MessageType::PUSH, 0, 0, {2, 2, 2, 2})).size(), 1u);  // closes step 0 alone
  RequestPtr join = request(MessageType::JOIN, 1, 1);
  std::vector<RequestPtr> done = run(join);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(join->error, ErrorCode::NONE);
  EXPECT_EQ(reply(join), (std::vector<float>{-2, -2, -2, -2}));

  RequestPtr pull = request(MessageType::PULL, 0, 2);
  EXPECT_TRUE(run(pull).empty());
  EXPECT_EQ(run(request(MessageType::PUSH, 0, 1, {2, 2, 2, 2})).size(), 1u);  // waits for the joined worker
  EXPECT_EQ(slice().requests.waiting(), 1u);
  done = run(request(MessageType::PUSH, 1, 1, {4, 4, 4, 4}));
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0], pull);
  EXPECT_EQ(reply(pull), (std::vector<float>{-5, -5, -5, -5}));
}

TEST_F(ASlice, AJoinAtAStepTheSliceHasPassedIsRefused) {
  init({0, 0, 0, 0});
  ASSERT_EQ(run(request(MessageType::PUSH, 0, 0, {1, 1, 1, 1})).size(), 1u);
  ASSERT_EQ(run(request(MessageType::PUSH, 1, 0, {1, 1, 1, 1})).size(), 1u);
  RequestPtr join = request(MessageType::JOIN, 1, 0);
  ASSERT_EQ(run(join).size(), 1u);
  EXPECT_EQ(join->error, ErrorCode::BAD_STEP);
  EXPECT_NE(join->error_message.find("already at step 1"), std::string::npos) << join->error_message;
}

TEST_F(ASlice, AStalledReadIsGivenUpNamingTheMissingWorker) {
  init({0, 0, 0, 0});
  ASSERT_EQ(run(request(MessageType::PUSH, 0, 0, {1, 1, 1, 1})).size(), 1u);
  RequestPtr pull = request(MessageType::PULL, 0, 1);
  EXPECT_TRUE(run(pull).empty());
  std::vector<StallReport> reports;
  StallWatch watch(0, std::chrono::milliseconds(0), std::chrono::milliseconds(0), std::chrono::milliseconds(1000),
                   [&](const StallReport& r) { reports.push_back(r); });
  const auto now = std::chrono::steady_clock::now();
  EXPECT_TRUE(slice().requests.check_stalls(watch, now, dead).empty());  // not yet
  std::vector<RequestPtr> done = slice().requests.check_stalls(watch, now + std::chrono::seconds(2), dead);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0], pull);
  EXPECT_EQ(pull->error, ErrorCode::STALLED);
  EXPECT_NE(pull->error_message.find("the push of worker 1, which did not come"), std::string::npos)
      << pull->error_message;
  EXPECT_EQ(slice().requests.waiting(), 0u);
}

TEST_F(ASlice, ANonFiniteGradientIsRefusedAndTheWeightsStay) {
  init({1, 1, 1, 1});
  RequestPtr push = request(MessageType::PUSH, 0, 0, {0, 0, std::nanf(""), 0});
  ASSERT_EQ(run(push).size(), 1u);
  EXPECT_EQ(push->error, ErrorCode::NON_FINITE_GRADIENT);
  EXPECT_NE(push->error_message.find("element 2 is nan"), std::string::npos) << push->error_message;
  RequestPtr pull = request(MessageType::PULL, 1, 0);
  ASSERT_EQ(run(pull).size(), 1u);
  EXPECT_EQ(reply(pull), (std::vector<float>{1, 1, 1, 1}));
}

TEST_F(ASlice, ReadsBeforeTheInitWaitForIt) {
  RequestPtr pull = request(MessageType::PULL, 1, 0);
  EXPECT_TRUE(run(pull).empty());
  RequestPtr init_request = request(MessageType::INIT, 0, 0, {5, 6, 7, 8});
  std::vector<RequestPtr> done = run(init_request);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0], pull);
  EXPECT_EQ(done[1], init_request);
  EXPECT_EQ(reply(pull), (std::vector<float>{5, 6, 7, 8}));
  RequestPtr again = request(MessageType::INIT, 0, 0, {0, 0, 0, 0});
  ASSERT_EQ(run(again).size(), 1u);
  EXPECT_EQ(again->error, ErrorCode::ALREADY_INITIALIZED);
}

}  // namespace
}  // namespace pshard
