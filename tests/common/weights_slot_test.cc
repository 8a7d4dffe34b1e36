// WeightsSlot: readers wait for a version and copy it whole while the writer goes on; a wait ends at its deadline or
// when cancelled.
#include "common/transport/weights_slot.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "common/transport/push_slot.h"

namespace pshard::transport {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kValues = 1000;

// A segment with two slots of kValues floats: the weights, and a push slot for the reader's acknowledgement.
struct TwoSlots {
  SliceLayout layout{{{"w", kValues}, {"ack", kValues}}, kValues * sizeof(float), 1};
  SlotTable table{layout, 0};
  SharedSegment segment = SharedSegment::create("weights slot test", table.bytes());
  SlotHead* weights() const { return table.head(segment.data(), 0); }
  SlotHead* ack() const { return table.head(segment.data(), 1); }
};

// The writer publishes versions 1..steps (every value = the version) and waits for the reader's acknowledgement of
// each before the next, so both sides sleep on many hand-offs: a lost wake-up costs 50 ms, and the 5 s deadline (the
// run takes 20 ms) fails the run.
bool write_versions(const TwoSlots& s, int steps) {
  WeightsSlot slot(s.weights());
  PushSlot ack(s.ack());
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  for (int v = 1; v <= steps; ++v) {
    slot.write(std::vector<float>(kValues, static_cast<float>(v)).data(), kValues, static_cast<uint64_t>(v));
    if (ack.wait_full(deadline) != PushSlot::Wait::kReady || ack.tag() != static_cast<uint64_t>(v)) return false;
    ack.free();
  }
  return true;
}

void read_versions(const TwoSlots& s, int steps) {
  WeightsSlot slot(s.weights());
  PushSlot ack(s.ack());
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  std::vector<float> out(kValues);
  for (int v = 1; v <= steps; ++v) {
    ASSERT_EQ(slot.wait_for(static_cast<uint64_t>(v), deadline), WeightsSlot::Wait::kReady) << "version " << v;
    ASSERT_TRUE(slot.read(out.data(), kValues));
    ASSERT_EQ(out, std::vector<float>(kValues, static_cast<float>(v)));
    ASSERT_EQ(ack.wait_free(deadline), PushSlot::Wait::kReady);
    ack.fill(out.data(), 1, static_cast<uint64_t>(v));
  }
}

TEST(WeightsSlot, AReaderThreadWaitsForEachVersionTheWriterPublishes) {
  TwoSlots s;
  constexpr int kSteps = 1000;
  bool written = false;
  std::thread writer([&] { written = write_versions(s, kSteps); });
  read_versions(s, kSteps);
  writer.join();
  EXPECT_TRUE(written);
  EXPECT_EQ(WeightsSlot(s.weights()).generation(), static_cast<uint64_t>(kSteps));
}

TEST(WeightsSlot, AReaderProcessWaitsForAWriterProcess) {
  TwoSlots s;
  constexpr int kSteps = 500;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(write_versions(s, kSteps) ? 0 : 3);
  read_versions(s, kSteps);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(WeightsSlot, AWaitEndsAtItsDeadlineOrWhenCancelledAndAnInPlaceWriteIsOneVersion) {
  TwoSlots s;
  WeightsSlot slot(s.weights());
  EXPECT_EQ(slot.wait_for(1, Clock::now() + std::chrono::milliseconds(20)), WeightsSlot::Wait::kTimedOut);
  std::atomic<bool> cancelled{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    cancelled = true;
  });
  EXPECT_EQ(slot.wait_for(1, Clock::now() + std::chrono::seconds(60), &cancelled), WeightsSlot::Wait::kCancelled);
  canceller.join();
  slot.begin_write();
  SlotTable::values(s.weights())[0] = 5.0f;
  EXPECT_EQ(slot.generation(), 0u);
  slot.end_write(3);
  EXPECT_EQ(slot.generation(), 3u);
  EXPECT_EQ(slot.wait_for(2, Clock::now()), WeightsSlot::Wait::kReady);  // a later version serves an earlier wait
  std::vector<float> out(kValues);
  ASSERT_TRUE(slot.read(out.data(), kValues));
  EXPECT_EQ(out[0], 5.0f);
}

}  // namespace
}  // namespace pshard::transport
