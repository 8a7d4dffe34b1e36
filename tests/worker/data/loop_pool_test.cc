// LoopPool: every iteration runs once, errors come back to the caller, loops from several threads take turns.
#include "worker/data/loop_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "common/error.h"

namespace pshard::data {
namespace {

TEST(LoopPool, RunsEveryIterationOnceForManyLoops) {
  LoopPool pool(3);
  for (int loop = 0; loop < 50; ++loop) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(loop));
    pool.run(loop, [&](int64_t i) { hits[static_cast<size_t>(i)]++; });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "loop " << loop;
  }
}

TEST(LoopPool, UsesTheHelperThreads) {
  LoopPool pool(2);
  std::atomic<int> inside{0}, most{0};
  pool.run(40, [&](int64_t) {
    int now = ++inside;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    --inside;
  });
  EXPECT_EQ(most.load(), 2);
}

TEST(LoopPool, FirstErrorReachesTheCallerAndThePoolStaysUsable) {
  LoopPool pool(2);
  try {
    pool.run(20, [](int64_t i) {
      if (i == 5) throw Error("image 5 is broken");
    });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "image 5 is broken");
  }
  std::atomic<int> count{0};
  pool.run(10, [&](int64_t) { ++count; });
  EXPECT_EQ(count.load(), 10);
}

TEST(LoopPool, LoopsFromTwoThreadsTakeTurns) {
  LoopPool pool(2);
  std::atomic<int> a{0}, b{0};
  std::thread other([&] {
    for (int k = 0; k < 20; ++k) pool.run(7, [&](int64_t) { ++a; });
  });
  for (int k = 0; k < 20; ++k) pool.run(5, [&](int64_t) { ++b; });
  other.join();
  EXPECT_EQ(a.load(), 140);
  EXPECT_EQ(b.load(), 100);
}

TEST(LoopPool, RefusesZeroThreads) { EXPECT_THROW(LoopPool(0), Error); }

}  // namespace
}  // namespace pshard::data
