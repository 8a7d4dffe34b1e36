// protocol::check_request: token, sender, layout fingerprint, key ownership and lengths.
#include "common/protocol/request_check.h"

#include <gtest/gtest.h>

namespace pshard::protocol {
namespace {

class RequestCheckTest : public ::testing::Test {
 protected:
  // slice_bytes 40 = 10 floats: "a" -> 3 slices (10,10,5), "b" -> 1 slice (10) on 2 servers.
  SliceLayout layout{{{"a", 25}, {"b", 10}}, 40, 2};
  ServerView view{"tok", 0, 3, &layout};

  Message request(MessageType type, uint32_t slice_id) {
    Message m;
    m.type = type;
    m.job_token = "tok";
    m.sender_role = Role::WORKER;
    m.sender_rank = 1;
    m.layout_fingerprint = layout.fingerprint();
    const SliceInfo& s = layout.slice(slice_id);
    m.keys.push_back({s.tensor, s.slice, s.offset, s.length, DType::FLOAT32});
    return m;
  }
  uint32_t own_slice() {
    for (uint32_t i = 0; i < layout.slices().size(); ++i) {
      if (layout.slice(i).server == 0) return i;
    }
    return 0;
  }
  uint32_t other_slice() {
    for (uint32_t i = 0; i < layout.slices().size(); ++i) {
      if (layout.slice(i).server == 1) return i;
    }
    return 0;
  }
};

TEST_F(RequestCheckTest, AcceptsAWellFormedPushAndMapsKeysToSliceIds) {
  RequestCheck c = check_request(request(MessageType::PUSH, own_slice()), view);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(c.slice_ids, std::vector<uint32_t>{own_slice()});
}

TEST_F(RequestCheckTest, APushMayNameItsHostsContributorsInRankOrderSenderFirst) {
  Message m = request(MessageType::PUSH_PULL, own_slice());
  m.contributors = {1, 2};
  EXPECT_TRUE(check_request(m, view).ok);
  const std::vector<std::pair<std::vector<uint32_t>, std::string>> bad = {
      {{0, 1}, "the first contributor (worker 0) is not the sender, worker 1"},
      {{1, 3}, "contributor worker 3 >= number of workers 3"},
      {{1, 1}, "contributors are not in increasing rank order (worker 1 after worker 1)"},
  };
  for (const auto& [ranks, why] : bad) {
    m.contributors = ranks;
    const RequestCheck c = check_request(m, view);
    EXPECT_EQ(c.code, ErrorCode::BAD_SENDER);
    EXPECT_EQ(c.error, why);
  }
  m = request(MessageType::PULL, own_slice());
  m.contributors = {1, 2};
  EXPECT_EQ(check_request(m, view).error, "pull cannot name contributors (only a push can)");
}

// Worker 0 sends the initial weights; once it and every rank below the next live one were declared dead first, that
// rank does (ServerView::initialiser), and nobody else.
TEST_F(RequestCheckTest, InitComesFromTheInitialiser) {
  Message m = request(MessageType::INIT, own_slice());  // from worker 1
  EXPECT_EQ(check_request(m, view).error, "init must come from worker 0, not worker 1");
  ServerView rank0_dead = view;
  rank0_dead.initialiser = 1;
  EXPECT_TRUE(check_request(m, rank0_dead).ok);
  m.sender_rank = 0;
  EXPECT_EQ(check_request(m, rank0_dead).code, ErrorCode::BAD_SENDER);
}

TEST_F(RequestCheckTest, RefusesEachKindOfBadRequest) {
  Message m = request(MessageType::PUSH, own_slice());
  m.job_token = "other";
  EXPECT_EQ(check_request(m, view).code, ErrorCode::BAD_TOKEN);

  m = request(MessageType::PUSH, own_slice());
  m.sender_rank = 3;
  EXPECT_EQ(check_request(m, view).code, ErrorCode::BAD_SENDER);

  m = request(MessageType::INIT, own_slice());
  EXPECT_EQ(check_request(m, view).code, ErrorCode::BAD_SENDER);  // init from worker 1

  m = request(MessageType::PUSH, own_slice());
  m.layout_fingerprint ^= 1;
  EXPECT_EQ(check_request(m, view).code, ErrorCode::LAYOUT_MISMATCH);

  m = request(MessageType::PUSH, own_slice());
  m.keys[0].slice = 9;
  EXPECT_EQ(check_request(m, view).code, ErrorCode::UNKNOWN_KEY);

  m = request(MessageType::PUSH, other_slice());
  RequestCheck c = check_request(m, view);
  EXPECT_EQ(c.code, ErrorCode::WRONG_SERVER);
  EXPECT_NE(c.error.find("belongs to server 1"), std::string::npos) << c.error;

  m = request(MessageType::PUSH, own_slice());
  m.keys[0].length += 1;
  EXPECT_EQ(check_request(m, view).code, ErrorCode::WRONG_LENGTH);

  m = request(MessageType::PUSH, own_slice());
  m.keys.push_back(m.keys[0]);
  EXPECT_EQ(check_request(m, view).code, ErrorCode::DUPLICATE_KEY);

  m = request(MessageType::PULL, own_slice());
  m.step = -1;
  EXPECT_EQ(check_request(m, view).code, ErrorCode::BAD_STEP);

  m = request(MessageType::WEIGHTS, own_slice());
  EXPECT_EQ(check_request(m, view).code, ErrorCode::UNKNOWN_TYPE);

  ServerView fresh{"tok", 0, 3, nullptr};
  EXPECT_EQ(check_request(request(MessageType::PULL, own_slice()), fresh).code, ErrorCode::NOT_INITIALIZED);
}

}  // namespace
}  // namespace pshard::protocol
