// BatchClaims (the coordinator's side of cluster.batch_assignment = dynamic): each epoch's batches in order, each to
// one claim, and the claims it refuses, naming the numbers.
#include "common/control/batch_claims.h"

#include <gtest/gtest.h>

#include <string>

#include "common/error.h"

namespace pshard::coordinator_detail {
namespace {

std::string refusal(BatchClaims& claims, int64_t epoch, int64_t batches, uint32_t count) {
  try {
    claims.claim(epoch, batches, count);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(BatchClaims, HandsOutEachEpochsBatchesOnceInOrder) {
  BatchClaims claims;
  int64_t next = 0;
  for (int i = 0; i < 4; ++i) {
    const BatchClaims::Grant g = claims.claim(1, 10, 3);
    EXPECT_EQ(g.first, next);
    EXPECT_EQ(g.count, i < 3 ? 3u : 1u);
    next += g.count;
  }
  EXPECT_EQ(claims.claim(1, 10, 3).count, 0u);
  // Epochs are independent: a worker ahead in epoch 2 takes its first batches while epoch 1 ends.
  EXPECT_EQ(claims.claim(2, 10, 4).first, 0);
  EXPECT_EQ(claims.claim(2, 10, 4).first, 4);
}

TEST(BatchClaims, RefusesClaimsThatNameOtherNumbers) {
  BatchClaims claims;
  claims.claim(1, 10, 2);
  EXPECT_NE(refusal(claims, 1, 12, 2).find("holds 12 batches, an earlier one 10"), std::string::npos);
  EXPECT_NE(refusal(claims, 0, 10, 2).find("epochs count from 1"), std::string::npos);
  EXPECT_NE(refusal(claims, 2, 0, 2).find("holds 0 batches"), std::string::npos);
  EXPECT_NE(refusal(claims, 2, 10, 0).find("asks for 0 batches: 1 to 4096"), std::string::npos);
  EXPECT_NE(refusal(claims, 2, 10, 5000).find("asks for 5000 batches"), std::string::npos);
  // A refused claim takes nothing.
  EXPECT_EQ(claims.claim(1, 10, 2).first, 2);
}

}  // namespace
}  // namespace pshard::coordinator_detail
