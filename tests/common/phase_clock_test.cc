// PhaseClock: a thread's time goes to exactly one phase at a time; nested phases pause the outer one.
#include "common/metrics/phase_clock.h"

#include <gtest/gtest.h>

#include <thread>

namespace pshard {
namespace {

enum Phase : size_t { kOuter, kInner, kRest, kCount };

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TEST(PhaseClock, NestedPhasePausesTheOuterOneAndEverythingAddsUp) {
  PhaseTotals totals(kCount);
  std::chrono::steady_clock::time_point start, end;
  double rest_before_start = 0.0, counted = 0.0;
  {
    PhaseClock clock(totals, kRest);
    start = clock.flush();
    rest_before_start = totals.seconds(kRest);  // the instant between the clock's construction and `start`
    {
      ScopedPhase outer(kOuter);
      sleep_ms(20);
      {
        ScopedPhase inner(kInner);
        sleep_ms(60);
      }
      EXPECT_EQ(clock.phase(), kOuter);  // back where it was
    }
    EXPECT_EQ(clock.phase(), kRest);
    end = clock.flush();
    // Read before the clock's destructor credits the instant after `end` too.
    counted = totals.seconds(kOuter) + totals.seconds(kInner) + totals.seconds(kRest) - rest_before_start;
  }
  const double wall = std::chrono::duration<double>(end - start).count();
  EXPECT_GE(totals.seconds(kOuter), 0.020);
  EXPECT_GE(totals.seconds(kInner), 0.060);
  // The outer phase does not contain the inner one: 20 ms of sleep, not 80.
  EXPECT_LT(totals.seconds(kOuter), totals.seconds(kInner));
  // Nothing lost, nothing counted twice between `start` and `end` (to the nanosecond: the same clock readings). The
  // instants before `start` and after `end` are left out: a loaded or sanitised thread can spend any time there.
  EXPECT_NEAR(counted, wall, 1e-8);
}

TEST(PhaseClock, WithoutAClockScopedPhaseDoesNothing) {
  PhaseTotals totals(kCount);
  EXPECT_EQ(PhaseClock::current(), nullptr);
  { ScopedPhase p(kInner); }
  {
    PhaseClock clock(totals, kRest);
    EXPECT_EQ(PhaseClock::current(), &clock);
  }
  EXPECT_EQ(PhaseClock::current(), nullptr);  // uninstalled with its scope
  // Another thread has its own (no) clock.
  PhaseClock clock(totals, kRest);
  std::thread([] { EXPECT_EQ(PhaseClock::current(), nullptr); }).join();
}

TEST(PhaseClock, ThreadsAddIntoSharedTotals) {
  PhaseTotals totals(kCount);
  auto work = [&] {
    PhaseClock clock(totals, kRest);
    ScopedPhase p(kInner);
    sleep_ms(20);
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  EXPECT_GE(totals.seconds(kInner), 0.040);  // two threads' 20 ms each
}

}  // namespace
}  // namespace pshard
