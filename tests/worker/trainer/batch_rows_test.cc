// BatchRows: each table's distinct ids of a batch, each sample's rows gathered, and one gradient per distinct row.
#include "worker/trainer/batch_rows.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/error.h"

namespace pshard::trainer {
namespace {

TEST(BatchRows, DistinctIdsPerTableGatheredAndSummedPerRow) {
  // 4 samples x 2 fields; table 0 sees ids 9, 2, 9, 5; table 1 sees 1, 1, 1, 7.
  const std::vector<uint64_t> ids = {9, 1, 2, 1, 9, 1, 5, 7};
  BatchRows rows(2, 2);
  rows.prepare(ids.data(), 4);
  EXPECT_EQ(rows.ids(0), (std::vector<uint64_t>{2, 5, 9}));
  EXPECT_EQ(rows.ids(1), (std::vector<uint64_t>{1, 7}));
  // A row's values are (id, -id): what a pull would bring.
  for (int f = 0; f < 2; ++f) {
    for (size_t i = 0; i < rows.ids(f).size(); ++i) {
      rows.values(f)[2 * i] = static_cast<float>(rows.ids(f)[i]);
      rows.values(f)[2 * i + 1] = -static_cast<float>(rows.ids(f)[i]);
    }
  }
  std::vector<float> gathered(4 * 2 * 2);
  rows.gather(gathered.data());
  for (size_t k = 0; k < ids.size(); ++k) {
    EXPECT_EQ(gathered[2 * k], static_cast<float>(ids[k]));
    EXPECT_EQ(gathered[2 * k + 1], -static_cast<float>(ids[k]));
  }
  // Gradient of sample s, field f: (s + 1) * (f + 1), and its negative.
  std::vector<float> grads(4 * 2 * 2);
  for (int s = 0; s < 4; ++s) {
    for (int f = 0; f < 2; ++f) {
      grads[static_cast<size_t>((s * 2 + f) * 2)] = static_cast<float>((s + 1) * (f + 1));
      grads[static_cast<size_t>((s * 2 + f) * 2 + 1)] = -static_cast<float>((s + 1) * (f + 1));
    }
  }
  rows.scatter(grads.data());
  // Table 0: id 2 <- sample 1 (2); id 5 <- sample 3 (4); id 9 <- samples 0 and 2 (1 + 3).
  EXPECT_EQ(std::vector<float>(rows.grads(0), rows.grads(0) + 6), (std::vector<float>{2, -2, 4, -4, 4, -4}));
  // Table 1: id 1 <- samples 0, 1, 2 (2 + 4 + 6); id 7 <- sample 3 (8).
  EXPECT_EQ(std::vector<float>(rows.grads(1), rows.grads(1) + 4), (std::vector<float>{12, -12, 8, -8}));
  // A second scatter replaces the sums, and a new batch starts from zero gradients.
  rows.scatter(grads.data());
  EXPECT_EQ(rows.grads(1)[0], 12.0f);
  rows.prepare(ids.data(), 1);
  EXPECT_EQ(rows.ids(0), (std::vector<uint64_t>{9}));
  EXPECT_EQ(rows.grads(0)[0], 0.0f);
}

TEST(BatchRows, RefusesNoTablesOrEmptyRows) {
  EXPECT_THROW(BatchRows(0, 4), Error);
  EXPECT_THROW(BatchRows(2, 0), Error);
}

}  // namespace
}  // namespace pshard::trainer
