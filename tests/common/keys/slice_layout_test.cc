// SliceLayout: slice cut, balance of bytes per server, determinism and the fingerprint.
#include "common/keys/slice_layout.h"

#include <gtest/gtest.h>

#include <numeric>

#include "common/error.h"

namespace pshard {
namespace {

TEST(SliceLayout, CutsTensorsIntoSlicesOfAtMostSliceBytes) {
  // 40 bytes per slice = 10 floats.
  SliceLayout l({{"a", 25}, {"b", 10}, {"c", 3}}, 40, 2);
  ASSERT_EQ(l.slices().size(), 3u + 1u + 1u);
  EXPECT_EQ(l.slice(0).offset, 0u);
  EXPECT_EQ(l.slice(0).length, 10u);
  EXPECT_EQ(l.slice(2).offset, 20u);
  EXPECT_EQ(l.slice(2).length, 5u);  // remainder
  EXPECT_EQ(l.slice(3).tensor, 1u);
  EXPECT_EQ(l.slice(3).length, 10u);
  EXPECT_EQ(l.slice(4).length, 3u);
  EXPECT_EQ(l.slices_of("a"), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(l.find(0, 2), 2);
  EXPECT_EQ(l.find(0, 3), -1);
  EXPECT_EQ(l.find(7, 0), -1);
  EXPECT_EQ(l.describe(2), "a[slice 2]");
}

TEST(SliceLayout, LargestFirstGreedyBalancesBytes) {
  // Slices of 10,10,5 (a) 10 (b) 3 (c) floats on 2 servers: 10->0, 10->1, 10->0, 5->1, 3->1.
  SliceLayout l({{"a", 25}, {"b", 10}, {"c", 3}}, 40, 2);
  EXPECT_EQ(l.slice(0).server, 0u);
  EXPECT_EQ(l.slice(1).server, 1u);
  EXPECT_EQ(l.slice(3).server, 0u);
  EXPECT_EQ(l.slice(2).server, 1u);
  EXPECT_EQ(l.slice(4).server, 1u);
  EXPECT_EQ(l.bytes_on_server(0), 80u);
  EXPECT_EQ(l.bytes_on_server(1), 72u);
}

TEST(SliceLayout, ManyEqualSlicesSpreadEvenly) {
  SliceLayout l({{"w", 1000 * 256}}, 1024, 3);  // 1000 slices of 256 floats
  uint64_t lo = UINT64_MAX, hi = 0, total = 0;
  for (uint32_t s = 0; s < 3; ++s) {
    lo = std::min(lo, l.bytes_on_server(s));
    hi = std::max(hi, l.bytes_on_server(s));
    total += l.bytes_on_server(s);
  }
  EXPECT_EQ(total, 1000u * 1024u);
  EXPECT_LE(hi - lo, 1024u);  // at most one slice apart
}

TEST(SliceLayout, SameInputsSameAssignmentAndFingerprint) {
  std::vector<TensorSpec> t = {{"fc1.weight", 784 * 256}, {"fc1.bias", 256}, {"fc2.weight", 256 * 10}};
  SliceLayout a(t, 1 << 16, 4), b(t, 1 << 16, 4);
  ASSERT_EQ(a.slices().size(), b.slices().size());
  for (size_t i = 0; i < a.slices().size(); ++i) EXPECT_EQ(a.slice(i).server, b.slice(i).server);
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  EXPECT_NE(a.fingerprint(), 0u);
  EXPECT_NE(a.fingerprint(), SliceLayout(t, 1 << 16, 3).fingerprint());
  EXPECT_NE(a.fingerprint(), SliceLayout(t, 1 << 15, 4).fingerprint());
  auto renamed = t;
  renamed[1].name = "fc1.b";
  EXPECT_NE(a.fingerprint(), SliceLayout(renamed, 1 << 16, 4).fingerprint());
  auto resized = t;
  resized[2].numel += 1;
  EXPECT_NE(a.fingerprint(), SliceLayout(resized, 1 << 16, 4).fingerprint());
}

TEST(SliceLayout, BadInputsAreErrorsNamingTheTensor) {
  EXPECT_THROW(SliceLayout({}, 1024, 1), Error);
  EXPECT_THROW(SliceLayout({{"a", 4}}, 2, 1), Error);
  EXPECT_THROW(SliceLayout({{"a", 4}}, 1024, 0), Error);
  try {
    SliceLayout({{"a", 4}, {"a", 5}}, 1024, 1);
    FAIL() << "duplicate name accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'a'"), std::string::npos);
  }
  try {
    SliceLayout({{"empty", 0}}, 1024, 1);
    FAIL() << "empty tensor accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos);
  }
  SliceLayout l({{"a", 4}}, 1024, 1);
  EXPECT_THROW(l.tensor_id("b"), Error);
}

// Found by fuzz_kv_message: an init announcing a 2^31-element tensor with 4-byte slices made the
// server build 2^31 slices (80 GB; the old limit was 2^32). The limit is checked before anything is allocated.
TEST(SliceLayout, MoreThanMaxSlicesIsAnErrorNamingTheTensor) {
  const uint64_t half = SliceLayout::kMaxSlices / 2;
  SliceLayout at_limit({{"a", half}, {"b", half}}, 4, 1);
  EXPECT_EQ(at_limit.slices().size(), SliceLayout::kMaxSlices);
  try {
    SliceLayout({{"a", half}, {"b", half + 1}}, 4, 2);
    FAIL() << "a layout over the limit was built";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'b'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("raise cluster.slice_bytes"), std::string::npos) << e.what();
  }
  EXPECT_THROW(SliceLayout({{"w", uint64_t(1) << 31}}, 4, 2), Error);
  EXPECT_THROW(SliceLayout({{"w", UINT64_MAX}}, 4, 2), Error);
  // numel + elements per slice - 1 overflowed: the tensor got 0 slices instead of 16.
  SliceLayout wide({{"w", UINT64_MAX}}, uint64_t(1) << 62, 1);
  ASSERT_EQ(wide.slices().size(), 16u);
  EXPECT_EQ(wide.slice(15).offset + wide.slice(15).length, UINT64_MAX);
}

}  // namespace
}  // namespace pshard
