// PushSlot: a writer and a reader hand one slot back and forth, across threads and across processes; a wait ends at
// its deadline or when cancelled; the writer's copy notes the first non-finite value.
#include "common/transport/push_slot.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace pshard::transport {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kValues = 1000;

// A segment with one slot of kValues floats (a SlotTable of a one-slice layout).
struct OneSlot {
  SliceLayout layout{{{"g", kValues}}, kValues * sizeof(float), 1};
  SlotTable table{layout, 0};
  SharedSegment segment = SharedSegment::create("push slot test", table.bytes());
  SlotHead* head() const { return table.head(segment.data(), 0); }
};

std::vector<float> step_values(int step) {
  std::vector<float> v(kValues);
  for (size_t i = 0; i < kValues; ++i) v[i] = static_cast<float>(step) * 1000.0f + static_cast<float>(i);
  return v;
}

// The reader side of `steps` handshakes: every fill arrives whole, in order, and is freed for the next.
void read_steps(PushSlot reader, int steps) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  for (int step = 0; step < steps; ++step) {
    ASSERT_EQ(reader.wait_full(deadline), PushSlot::Wait::kReady) << "step " << step;
    ASSERT_EQ(reader.tag(), static_cast<uint64_t>(step));
    ASSERT_EQ(reader.first_non_finite(), kValues);
    const std::vector<float> want = step_values(step);
    ASSERT_EQ(std::vector<float>(reader.values(), reader.values() + kValues), want) << "step " << step;
    reader.free();
  }
}

TEST(PushSlot, AWriterAndAReaderThreadHandTheSlotBackAndForth) {
  OneSlot s;
  constexpr int kSteps = 2000;
  std::thread writer([&] {
    PushSlot slot(s.head());
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    for (int step = 0; step < kSteps; ++step) {
      ASSERT_EQ(slot.wait_free(deadline), PushSlot::Wait::kReady) << "step " << step;
      slot.fill(step_values(step).data(), kValues, static_cast<uint64_t>(step));
    }
  });
  read_steps(PushSlot(s.head()), kSteps);
  writer.join();
  EXPECT_FALSE(PushSlot(s.head()).full());
}

TEST(PushSlot, AWriterProcessAndAReaderProcessShareTheSlot) {
  OneSlot s;
  constexpr int kSteps = 500;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    PushSlot slot(s.head());
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    for (int step = 0; step < kSteps; ++step) {
      if (slot.wait_free(deadline) != PushSlot::Wait::kReady) ::_exit(3);
      slot.fill(step_values(step).data(), kValues, static_cast<uint64_t>(step));
    }
    ::_exit(0);
  }
  read_steps(PushSlot(s.head()), kSteps);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(PushSlot, AWaitEndsAtItsDeadlineOrWhenCancelled) {
  OneSlot s;
  PushSlot slot(s.head());
  EXPECT_EQ(slot.wait_full(Clock::now() + std::chrono::milliseconds(20)), PushSlot::Wait::kTimedOut);
  EXPECT_EQ(slot.wait_free(Clock::now()), PushSlot::Wait::kReady);  // free from the start
  slot.fill(step_values(1).data(), kValues, 1);
  EXPECT_TRUE(slot.full());
  EXPECT_EQ(slot.wait_free(Clock::now() + std::chrono::milliseconds(20)), PushSlot::Wait::kTimedOut);
  std::atomic<bool> cancelled{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    cancelled = true;
  });
  EXPECT_EQ(slot.wait_free(Clock::now() + std::chrono::seconds(60), &cancelled), PushSlot::Wait::kCancelled);
  canceller.join();
  // The timed-out and cancelled waits left the slot as it was: full, with the values of step 1.
  EXPECT_TRUE(slot.full());
  EXPECT_EQ(slot.tag(), 1u);
  EXPECT_EQ(slot.values()[kValues - 1], 1000.0f + static_cast<float>(kValues - 1));
  slot.free();
  EXPECT_FALSE(slot.full());
}

TEST(PushSlot, TheWritersCopyNotesTheFirstNonFiniteValue) {
  OneSlot s;
  PushSlot slot(s.head());
  std::vector<float> v = step_values(0);
  v[700] = std::numeric_limits<float>::infinity();
  v[300] = std::nanf("");
  slot.fill(v.data(), kValues, 7);
  EXPECT_EQ(slot.first_non_finite(), 300u);
  EXPECT_TRUE(std::isnan(slot.values()[300]));
  slot.free();
  slot.fill(step_values(2).data(), kValues, 8);
  EXPECT_EQ(slot.first_non_finite(), kValues);
}

}  // namespace
}  // namespace pshard::transport
