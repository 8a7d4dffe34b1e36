// RowArena: first-fit regions of a worker's row segment, aligned, the lowest offset first, reused once released.
#include "worker/client/row_arena.h"

#include <gtest/gtest.h>

namespace pshard {
namespace {

TEST(RowArena, RegionsAreAlignedFirstFitAndReusedOnceReleased) {
  RowArena arena(1024);
  EXPECT_EQ(arena.allocate(100), 0);  // 128 bytes with the alignment
  EXPECT_EQ(arena.allocate(64), 128);
  EXPECT_EQ(arena.allocate(1), 192);
  EXPECT_EQ(arena.in_use(), 256u);
  arena.release(128);
  EXPECT_EQ(arena.allocate(65), 256);  // does not fit the 64-byte gap at 128
  EXPECT_EQ(arena.allocate(64), 128);  // fits it: the lowest offset first
  EXPECT_EQ(arena.allocate(1024 - 384), 384);
  EXPECT_EQ(arena.allocate(1), -1);  // full
  arena.release(0);
  EXPECT_EQ(arena.allocate(128), 0);
  EXPECT_EQ(arena.allocate(0), -1);     // nothing to place
  EXPECT_EQ(arena.allocate(2048), -1);  // more than the segment
  arena.release(-1);                    // no region: nothing
  arena.release(8);                     // not a region's start: nothing
  EXPECT_EQ(arena.in_use(), 1024u);
}

TEST(RowArena, ARegionIsFreedWhenAnsweredAndKeptWhenNot) {
  RowArena arena(256);
  {
    RowRegion answered;
    answered.arena = &arena;
    answered.offset = arena.allocate(128);
    answered.answered = true;
    RowRegion lost;  // no answer came (a timeout): the server may still write there
    lost.arena = &arena;
    lost.offset = arena.allocate(128);
  }
  EXPECT_EQ(arena.in_use(), 128u);
  EXPECT_EQ(arena.allocate(128), 0);
  EXPECT_EQ(arena.allocate(1), -1);
}

}  // namespace
}  // namespace pshard
