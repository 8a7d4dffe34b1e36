// Consistency policies on a fake slice: BSP sums in rank order and closes a step without a dead worker, ASP applies
// every push, SSP answers a reader exactly up to the staleness bound.
#include "server/consistency/consistency_policy.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

namespace pshard {
namespace {

// Records what the policy did to it instead of running an optimizer.
struct FakeSlice final : ConsistencySlice {
  explicit FakeSlice(uint64_t n) : n(n) {}
  uint64_t n;
  bool init = true;
  int64_t ver = 0;
  std::vector<std::vector<float>> applied;  // each gradient given to apply()
  std::vector<int64_t> lr_steps;
  std::vector<uint32_t> lr_workers;  // apply: how many workers' gradients the mean holds
  std::vector<bool> closed;          // step_closed: whether a checkpoint was asked
  std::vector<bool> stops;           // step_closed: whether the stop was asked

  bool initialized() const override { return init; }
  uint64_t length() const override { return n; }
  int64_t version() const override { return ver; }
  void apply(const float* g, int64_t lr_step, uint32_t workers) override {
    applied.emplace_back(g, g + n);
    lr_steps.push_back(lr_step);
    lr_workers.push_back(workers);
    ++ver;
  }
  void step_closed(StepRequests asked) override {
    closed.push_back(asked.checkpoint);
    stops.push_back(asked.stop);
  }
  std::string name() const override { return "w slice 0"; }
};

std::shared_ptr<zmq::message_t> grad(std::vector<float> v) {
  return std::make_shared<zmq::message_t>(v.data(), v.size() * sizeof(float));
}

struct Fixture {
  explicit Fixture(Consistency mode, uint32_t workers, int64_t staleness = 0, BackupWorkers backup = {})
      : slice(2), dead(workers, 0), policy(make_consistency_policy({mode, workers, staleness, backup}, slice)) {}
  PushResult push(uint32_t rank, int64_t step, std::vector<float> g, bool checkpoint = false, bool stop = false,
                  bool skip = false) {
    return policy->on_push({rank}, step, StepRequests{checkpoint, stop, skip}, grad(std::move(g)), dead, scratch);
  }
  // The sum of the workers `from` (one host's workers, summed by the first of them).
  PushResult push_sum(Contributors from, int64_t step, std::vector<float> g) {
    return policy->on_push(from, step, StepRequests{}, grad(std::move(g)), dead, scratch);
  }
  FakeSlice slice;
  DeadWorkers dead;
  std::vector<float> scratch;
  std::unique_ptr<ConsistencyPolicy> policy;
};

TEST(BspPolicy, AStopAskedByOnePushOfAStepIsReportedWhenThatStepClosesAndNotLater) {
  Fixture f(Consistency::kBsp, 2);
  ASSERT_TRUE(f.push(0, 0, {1, 1}).ok());
  ASSERT_TRUE(f.push(1, 0, {1, 1}).ok());
  ASSERT_TRUE(f.push(1, 1, {1, 1}, /*checkpoint=*/false, /*stop=*/true).ok());  // worker 1 got SIGTERM
  EXPECT_EQ(f.slice.stops, (std::vector<bool>{false}));                         // step 1 still open
  ASSERT_TRUE(f.push(0, 1, {1, 1}).ok());
  EXPECT_EQ(f.slice.stops, (std::vector<bool>{false, true}));
  EXPECT_EQ(f.slice.closed, (std::vector<bool>{false, false}));  // the checkpoint flag is separate
  ASSERT_TRUE(f.push(0, 2, {1, 1}).ok());
  ASSERT_TRUE(f.push(1, 2, {1, 1}).ok());
  EXPECT_EQ(f.slice.stops, (std::vector<bool>{false, true, false}));  // asked once, for that step only
}

// Loss scaling: one push of a step says skip (its worker's gradients are not finite). The step closes once every worker
// pushed, applies nothing and reports no close; its readers are let through with the unchanged weights, told so,
// until a push of the step's second try comes; what the skipped step's pushes asked for (the stop) holds for that
// try, which applies the mean of its own pushes.
TEST(BspPolicy, AStepAPushSaysToSkipClosesWithoutAnUpdateAndOpensAgain) {
  Fixture f(Consistency::kBsp, 3);
  const float inf = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(f.push(0, 0, {1, 1}, false, /*stop=*/true).ok());
  ASSERT_TRUE(f.push(1, 0, {inf, 1}, false, false, /*skip=*/true).ok());
  EXPECT_FALSE(f.policy->ready(1, f.dead));  // worker 2 has not pushed
  ASSERT_TRUE(f.push(2, 0, {3, 3}).ok());
  EXPECT_TRUE(f.slice.applied.empty());
  EXPECT_TRUE(f.slice.stops.empty());  // not closed: the stop waits for the step's second try
  EXPECT_EQ(f.slice.version(), 0);
  EXPECT_TRUE(f.policy->ready(1, f.dead));
  EXPECT_TRUE(f.policy->skipped_before(1));
  EXPECT_FALSE(f.policy->skipped_before(2));
  EXPECT_FALSE(f.policy->ready(2, f.dead));
  ASSERT_TRUE(f.push(2, 0, {6, 6}).ok());  // the second try opens: its readers wait again
  EXPECT_FALSE(f.policy->ready(1, f.dead));
  EXPECT_FALSE(f.policy->skipped_before(1));
  ASSERT_TRUE(f.push(0, 0, {0, 0}).ok());
  ASSERT_TRUE(f.push(1, 0, {3, 3}).ok());
  ASSERT_EQ(f.slice.applied.size(), 1u);
  EXPECT_EQ(f.slice.applied[0], (std::vector<float>{3, 3}));
  EXPECT_EQ(f.slice.lr_steps, (std::vector<int64_t>{0}));
  EXPECT_EQ(f.slice.stops, (std::vector<bool>{true}));
  EXPECT_TRUE(f.policy->ready(1, f.dead));
  EXPECT_FALSE(f.policy->skipped_before(1));
}

TEST(AspAndSspPolicies, RefuseAPushThatAsksToSkipItsStep) {
  for (Consistency mode : {Consistency::kAsp, Consistency::kSsp}) {
    Fixture f(mode, 2, 1);
    const PushResult r = f.push(1, 0, {1, 1}, false, false, /*skip=*/true);
    EXPECT_EQ(r.code, protocol::ErrorCode::BAD_HEADER);
    EXPECT_EQ(r.why, "worker 1 asked to skip step 0: only sync jobs skip a step for all");
    EXPECT_TRUE(f.slice.applied.empty());
  }
}

TEST(BspPolicy, AppliesTheMeanOnceEveryWorkerHasPushedTheStep) {
  Fixture f(Consistency::kBsp, 3);
  EXPECT_TRUE(f.policy->ready(0, f.dead));
  EXPECT_FALSE(f.policy->ready(1, f.dead));
  ASSERT_TRUE(f.push(2, 0, {6, 0}).ok());  // out of rank order: held
  ASSERT_TRUE(f.push(0, 0, {3, 3}).ok());
  EXPECT_TRUE(f.slice.applied.empty());
  EXPECT_FALSE(f.policy->ready(1, f.dead));
  ASSERT_TRUE(f.push(1, 0, {0, 6}, /*checkpoint=*/true).ok());
  ASSERT_EQ(f.slice.applied.size(), 1u);
  EXPECT_EQ(f.slice.applied[0], (std::vector<float>{3, 3}));
  EXPECT_EQ(f.slice.lr_steps[0], 0);
  EXPECT_EQ(f.slice.closed, (std::vector<bool>{true}));
  EXPECT_EQ(f.slice.version(), 1);
  EXPECT_TRUE(f.policy->ready(1, f.dead));
  EXPECT_FALSE(f.policy->ready(2, f.dead));
}

TEST(BspPolicy, NamesTheLiveWorkersThatHaveNotPushedTheOpenStep) {
  Fixture f(Consistency::kBsp, 4);
  EXPECT_TRUE(f.policy->missing(0, f.dead).empty());  // step 0's weights are there
  EXPECT_EQ(f.policy->missing(1, f.dead), (std::vector<uint32_t>{0, 1, 2, 3}));
  ASSERT_TRUE(f.push(2, 0, {1, 1}).ok());
  ASSERT_TRUE(f.push(0, 0, {1, 1}).ok());
  EXPECT_EQ(f.policy->missing(1, f.dead), (std::vector<uint32_t>{1, 3}));
  f.dead[3] = 1;  // a dead worker is not waited for
  EXPECT_EQ(f.policy->missing(1, f.dead), (std::vector<uint32_t>{1}));
  ASSERT_TRUE(f.push(1, 0, {1, 1}).ok());
  f.policy->on_worker_dead(3, f.dead, f.scratch);
  EXPECT_EQ(f.slice.version(), 1);
  EXPECT_TRUE(f.policy->missing(1, f.dead).empty());
}

TEST(BspPolicy, SumsInRankOrderWhateverTheArrivalOrder) {
  // 1e8 + 1 - 1e8 is 0 in float when summed in rank order (0, 1, 2) and 1 in the order (0, 2, 1).
  const std::vector<std::vector<float>> g = {{1e8f, 0}, {1, 0}, {-1e8f, 0}};
  std::vector<float> means;
  for (const std::vector<uint32_t>& order : {std::vector<uint32_t>{0, 1, 2}, {2, 1, 0}, {0, 2, 1}}) {
    Fixture f(Consistency::kBsp, 3);
    for (uint32_t r : order) ASSERT_TRUE(f.push(r, 0, g[r]).ok());
    ASSERT_EQ(f.slice.applied.size(), 1u);
    means.push_back(f.slice.applied[0][0]);
  }
  EXPECT_EQ(means, (std::vector<float>{0, 0, 0}));
}

TEST(BspPolicy, AHostsSumCountsAsItsWorkersInTheMean) {
  Fixture f(Consistency::kBsp, 4);
  ASSERT_TRUE(f.push_sum({2, 3}, 0, {2, 6}).ok());  // host b: workers 2 and 3
  EXPECT_EQ(f.policy->missing(1, f.dead), (std::vector<uint32_t>{0, 1}));
  ASSERT_TRUE(f.push_sum({0, 1}, 0, {6, 2}).ok());  // host a
  ASSERT_EQ(f.slice.applied.size(), 1u);
  EXPECT_EQ(f.slice.applied[0], (std::vector<float>{2, 2}));  // (8, 8) / 4
  // One host holding every worker: its sum divided by 4.
  ASSERT_TRUE(f.push_sum({0, 1, 2, 3}, 1, {4, 8}).ok());
  ASSERT_EQ(f.slice.applied.size(), 2u);
  EXPECT_EQ(f.slice.applied[1], (std::vector<float>{1, 2}));
  // A host's sum next to a worker that pushed alone.
  ASSERT_TRUE(f.push(3, 2, {3, 3}).ok());
  ASSERT_TRUE(f.push_sum({0, 1, 2}, 2, {9, 1}).ok());
  ASSERT_EQ(f.slice.applied.size(), 3u);
  EXPECT_EQ(f.slice.applied[2], (std::vector<float>{3, 1}));
  EXPECT_EQ(f.slice.lr_workers, (std::vector<uint32_t>{4, 4, 4}));  // a host's sum counts as its workers
}

TEST(BspPolicy, AHostSumOfEveryWorkerRoundsAsTheServersOwnSum) {
  // The host's first worker sums in rank order, ((g0 + g1) + g2), then the server divides by 3: the same bits as
  // three separate pushes, whose last addition divides in the same pass.
  const std::vector<std::vector<float>> g = {{0.1f, 1e8f}, {0.2f, 1}, {0.7f, -3}};
  Fixture alone(Consistency::kBsp, 3), host(Consistency::kBsp, 3);
  for (uint32_t r : {2u, 0u, 1u}) ASSERT_TRUE(alone.push(r, 0, g[r]).ok());
  std::vector<float> sum(2);
  for (size_t i = 0; i < 2; ++i) sum[i] = (g[0][i] + g[1][i]) + g[2][i];
  ASSERT_TRUE(host.push_sum({0, 1, 2}, 0, sum).ok());
  ASSERT_EQ(alone.slice.applied.size(), 1u);
  ASSERT_EQ(host.slice.applied.size(), 1u);
  EXPECT_EQ(std::memcmp(alone.slice.applied[0].data(), host.slice.applied[0].data(), 2 * sizeof(float)), 0);
}

TEST(BspPolicy, RefusesAHostSumNamingAWorkerThatAlreadyPushedOrIsDead) {
  Fixture f(Consistency::kBsp, 4);
  ASSERT_TRUE(f.push(1, 0, {1, 1}).ok());
  PushResult r = f.push_sum({0, 1}, 0, {1, 1});
  EXPECT_EQ(r.code, protocol::ErrorCode::DUPLICATE_PUSH);
  EXPECT_EQ(r.why, "worker 1 already pushed step 0 of w slice 0");
  f.dead[3] = 1;
  r = f.push_sum({2, 3}, 0, {1, 1});
  EXPECT_EQ(r.code, protocol::ErrorCode::WORKER_DEAD);
  EXPECT_EQ(r.why, "worker 3 was declared dead");
  EXPECT_TRUE(f.slice.applied.empty());
  EXPECT_EQ(f.policy->missing(1, f.dead), (std::vector<uint32_t>{0, 2}));  // the refused sums counted nobody
}

TEST(AspAndSspPolicies, RefuseAHostSum) {
  for (Consistency mode : {Consistency::kAsp, Consistency::kSsp}) {
    Fixture f(mode, 2, 1);
    PushResult r = f.push_sum({0, 1}, 0, {1, 1});
    EXPECT_EQ(r.code, protocol::ErrorCode::BAD_SENDER);
    EXPECT_EQ(r.why, "worker 0 pushed the sum of 2 workers' gradients: only sync jobs combine a host's pushes");
    EXPECT_TRUE(f.slice.applied.empty());
  }
}

TEST(BspPolicy, RefusesAWrongStepADuplicateAndADeadWorker) {
  Fixture f(Consistency::kBsp, 2);
  PushResult r = f.push(0, 1, {1, 1});
  EXPECT_EQ(r.code, protocol::ErrorCode::BAD_STEP);
  EXPECT_EQ(r.why, "push of step 1 for w slice 0, which is at step 0");
  ASSERT_TRUE(f.push(0, 0, {1, 1}).ok());
  r = f.push(0, 0, {1, 1});
  EXPECT_EQ(r.code, protocol::ErrorCode::DUPLICATE_PUSH);
  EXPECT_EQ(r.why, "worker 0 already pushed step 0 of w slice 0");
  f.dead[1] = 1;
  r = f.push(1, 0, {1, 1});
  EXPECT_EQ(r.code, protocol::ErrorCode::WORKER_DEAD);
  EXPECT_EQ(r.why, "worker 1 was declared dead");
}

TEST(BspPolicy, ADeadWorkerClosesTheOpenStepWithTheOthersMean) {
  Fixture f(Consistency::kBsp, 3);
  ASSERT_TRUE(f.push(0, 0, {2, 4}).ok());
  ASSERT_TRUE(f.push(2, 0, {4, 8}).ok());
  EXPECT_FALSE(f.policy->ready(1, f.dead));
  f.dead[1] = 1;
  f.policy->on_worker_dead(1, f.dead, f.scratch);
  ASSERT_EQ(f.slice.applied.size(), 1u);
  EXPECT_EQ(f.slice.applied[0], (std::vector<float>{3, 6}));  // the mean of two, not three
  EXPECT_TRUE(f.policy->ready(1, f.dead));
  // The next step closes with the two live workers alone.
  ASSERT_TRUE(f.push(2, 1, {1, 1}).ok());
  ASSERT_TRUE(f.push(0, 1, {3, 3}).ok());
  ASSERT_EQ(f.slice.applied.size(), 2u);
  EXPECT_EQ(f.slice.applied[1], (std::vector<float>{2, 2}));
  EXPECT_EQ(f.slice.lr_steps, (std::vector<int64_t>{0, 1}));
  // Each update says how many workers' gradients it holds (an elastic job's learning rate follows it).
  EXPECT_EQ(f.slice.lr_workers, (std::vector<uint32_t>{2, 2}));
}

// The last contribution of a step divides by the count in the same pass as its addition; when the last rank dies
// after the others pushed, nothing was divided yet and the close divides. Both give the rounded sum's quotient.
TEST(BspPolicy, TheMeanIsTheRoundedSumDividedWhicheverContributionCloses) {
  const std::vector<std::vector<float>> g = {{0.1f, 1e8f}, {0.2f, 3.0f}, {0.3f, -7.0f}};
  auto mean = [&](size_t count, size_t i) {
    float sum = g[0][i];
    for (size_t r = 1; r < count; ++r) sum += g[r][i];
    return sum / static_cast<float>(count);
  };
  Fixture all(Consistency::kBsp, 3);
  for (uint32_t r : {2u, 0u, 1u}) ASSERT_TRUE(all.push(r, 0, g[r]).ok());
  ASSERT_EQ(all.slice.applied.size(), 1u);
  EXPECT_EQ(all.slice.applied[0], (std::vector<float>{mean(3, 0), mean(3, 1)}));

  Fixture lost(Consistency::kBsp, 3);  // ranks 0 and 1 push, then rank 2 dies
  ASSERT_TRUE(lost.push(0, 0, g[0]).ok());
  ASSERT_TRUE(lost.push(1, 0, g[1]).ok());
  EXPECT_TRUE(lost.slice.applied.empty());
  lost.dead[2] = 1;
  lost.policy->on_worker_dead(2, lost.dead, lost.scratch);
  ASSERT_EQ(lost.slice.applied.size(), 1u);
  EXPECT_EQ(lost.slice.applied[0], (std::vector<float>{mean(2, 0), mean(2, 1)}));
}

// Backup workers with a grace of 50 ms at least: a test's pushes in a row come well within it.
BackupWorkers one_backup() {
  BackupWorkers b;
  b.count = 1;
  b.grace_share = 0;
  b.grace_min = std::chrono::milliseconds(50);
  return b;
}

TEST(BspPolicy, WithABackupWorkerAStepClosesAfterTheGraceWithTheMeanOfThePushesItHas) {
  Fixture f(Consistency::kBsp, 3, 0, one_backup());
  ASSERT_TRUE(f.push(2, 0, {6, 0}).ok());
  EXPECT_FALSE(f.policy->close_by());  // one of three: no quorum yet
  ASSERT_TRUE(f.push(0, 0, {2, 2}).ok());
  const std::optional<PolicyClock::time_point> by = f.policy->close_by();
  ASSERT_TRUE(by);
  f.policy->on_clock(*by - std::chrono::milliseconds(1), f.dead, f.scratch);  // within the grace: still open
  EXPECT_TRUE(f.slice.applied.empty());
  EXPECT_EQ(f.policy->missing(1, f.dead), (std::vector<uint32_t>{1}));
  f.policy->on_clock(*by, f.dead, f.scratch);
  ASSERT_EQ(f.slice.applied.size(), 1u);
  EXPECT_EQ(f.slice.applied[0], (std::vector<float>{4, 1}));  // the mean of ranks 0 and 2
  EXPECT_EQ(f.slice.lr_workers, (std::vector<uint32_t>{2}));
  EXPECT_FALSE(f.policy->close_by());
  EXPECT_TRUE(f.policy->ready(1, f.dead));
  // Worker 1's push of step 0 comes late: taken, dropped, and what it asked for moves to the open step.
  const PushResult late = f.push(1, 0, {100, 100}, /*checkpoint=*/true);
  EXPECT_TRUE(late.ok());
  EXPECT_TRUE(late.dropped);
  EXPECT_EQ(f.slice.applied.size(), 1u);
  for (uint32_t r : {0u, 1u, 2u}) ASSERT_TRUE(f.push(r, 1, {1, 1}).ok());
  ASSERT_EQ(f.slice.applied.size(), 2u);  // all three came: closed at once, without a grace
  EXPECT_EQ(f.slice.closed, (std::vector<bool>{false, true}));
  EXPECT_FALSE(f.push(1, 3, {1, 1}).ok());  // a step not open yet is still refused
}

TEST(BspPolicy, WithABackupWorkerPushesThatAllComeWithinTheGraceGiveTheSameBitsAsWithout) {
  const std::vector<std::vector<float>> g = {{1e8f, 0.1f}, {1, 0.2f}, {-1e8f, 0.3f}};
  Fixture plain(Consistency::kBsp, 3);
  Fixture backup(Consistency::kBsp, 3, 0, one_backup());
  for (uint32_t r : {2u, 0u, 1u}) {
    ASSERT_TRUE(plain.push(r, 0, g[r]).ok());
    ASSERT_TRUE(backup.push(r, 0, g[r]).ok());
  }
  ASSERT_EQ(backup.slice.applied.size(), 1u);
  EXPECT_EQ(backup.slice.applied, plain.slice.applied);
  EXPECT_EQ(backup.slice.lr_workers, plain.slice.lr_workers);
}

TEST(BspPolicy, WithABackupWorkerALateRankIsSkippedInTheRankOrderSum) {
  // Ranks 0 and 2 pushed, rank 1 is late: the sum is rank 0's then rank 2's, rounded as a 2-worker step.
  const std::vector<std::vector<float>> g = {{0.1f, 1e8f}, {5, 5}, {0.3f, -7.0f}};
  Fixture f(Consistency::kBsp, 3, 0, one_backup());
  ASSERT_TRUE(f.push(2, 0, g[2]).ok());
  ASSERT_TRUE(f.push(0, 0, g[0]).ok());
  f.policy->on_clock(*f.policy->close_by(), f.dead, f.scratch);
  ASSERT_EQ(f.slice.applied.size(), 1u);
  EXPECT_EQ(f.slice.applied[0], (std::vector<float>{(g[0][0] + g[2][0]) / 2, (g[0][1] + g[2][1]) / 2}));
}

TEST(BspPolicy, WithABackupWorkerADeadWorkerLowersTheQuorum) {
  Fixture f(Consistency::kBsp, 4, 0, one_backup());
  ASSERT_TRUE(f.push(0, 0, {1, 1}).ok());
  ASSERT_TRUE(f.push(1, 0, {1, 1}).ok());
  EXPECT_FALSE(f.policy->close_by());  // 2 of 4: the quorum is 3
  f.dead[3] = 1;
  f.policy->on_worker_dead(3, f.dead, f.scratch);
  EXPECT_TRUE(f.policy->close_by());  // 2 of the 3 live
  EXPECT_TRUE(f.slice.applied.empty());
}

TEST(BspPolicy, WithoutBackupWorkersALatePushIsRefusedAndNothingClosesByTheClock) {
  Fixture f(Consistency::kBsp, 2);
  ASSERT_TRUE(f.push(0, 0, {1, 1}).ok());
  EXPECT_FALSE(f.policy->close_by());
  f.policy->on_clock(PolicyClock::now() + std::chrono::hours(1), f.dead, f.scratch);
  EXPECT_TRUE(f.slice.applied.empty());
  ASSERT_TRUE(f.push(1, 0, {1, 1}).ok());
  const PushResult late = f.push(1, 0, {1, 1});
  EXPECT_EQ(late.code, protocol::ErrorCode::BAD_STEP);
  EXPECT_FALSE(late.dropped);
}

TEST(BspPolicy, ARejoinedWorkerCountsFromItsJoinStep) {
  Fixture f(Consistency::kBsp, 2);
  f.dead[1] = 1;
  f.policy->on_worker_dead(1, f.dead, f.scratch);
  ASSERT_TRUE(f.push(0, 0, {1, 1}).ok());  // step 0 closes without worker 1
  EXPECT_EQ(f.slice.version(), 1);
  EXPECT_EQ(f.policy->on_join(1, 0), "the slice is already at step 1");
  EXPECT_EQ(f.policy->on_join(1, 2), "");
  ASSERT_TRUE(f.push(0, 1, {1, 1}).ok());  // step 1: worker 1 not yet counted
  EXPECT_EQ(f.slice.version(), 2);
  ASSERT_TRUE(f.push(0, 2, {1, 1}).ok());  // step 2: waits for worker 1
  EXPECT_EQ(f.slice.version(), 2);
  ASSERT_TRUE(f.push(1, 2, {3, 3}).ok());
  EXPECT_EQ(f.slice.version(), 3);
  EXPECT_EQ(f.slice.applied.back(), (std::vector<float>{2, 2}));
}

TEST(BspPolicy, JoinNeedsAnInitializedSlice) {
  Fixture f(Consistency::kBsp, 2);
  f.slice.init = false;
  EXPECT_EQ(f.policy->on_join(1, 0), "the slice is not initialised");
}

TEST(AspPolicy, AppliesEachPushOnArrivalAtItsStepsLearningRate) {
  Fixture f(Consistency::kAsp, 2);
  ASSERT_TRUE(f.push(1, 5, {1, 2}).ok());
  ASSERT_TRUE(f.push(1, 5, {3, 4}).ok());  // no duplicate check: every push counts
  ASSERT_TRUE(f.push(0, 0, {5, 6}).ok());
  ASSERT_EQ(f.slice.applied.size(), 3u);
  EXPECT_EQ(f.slice.applied[1], (std::vector<float>{3, 4}));
  EXPECT_EQ(f.slice.lr_steps, (std::vector<int64_t>{5, 5, 0}));
  EXPECT_EQ(f.slice.version(), 3);
  EXPECT_TRUE(f.slice.closed.empty());  // no steps, no checkpoints
  EXPECT_TRUE(f.policy->ready(1000, f.dead));
  EXPECT_EQ(f.policy->on_join(0, 0), "joining needs sync mode");
  f.dead[0] = 1;
  EXPECT_EQ(f.push(0, 1, {1, 1}).code, protocol::ErrorCode::WORKER_DEAD);
}

TEST(SspPolicy, NamesTheWorkersMoreThanStalenessClocksBehind) {
  Fixture f(Consistency::kSsp, 3, /*staleness=*/1);
  EXPECT_TRUE(f.policy->missing(1, f.dead).empty());
  ASSERT_TRUE(f.push(0, 0, {1, 1}).ok());
  ASSERT_TRUE(f.push(0, 1, {1, 1}).ok());
  ASSERT_TRUE(f.push(2, 0, {1, 1}).ok());
  EXPECT_FALSE(f.policy->ready(2, f.dead));
  EXPECT_EQ(f.policy->missing(2, f.dead), (std::vector<uint32_t>{1}));  // clocks 2, 0, 1: only worker 1 < 2 - 1
  EXPECT_EQ(f.policy->missing(3, f.dead), (std::vector<uint32_t>{1, 2}));
  f.dead[1] = 1;
  EXPECT_TRUE(f.policy->missing(2, f.dead).empty());
}

TEST(SspPolicy, AReaderMayRunAtMostStalenessClocksAheadOfTheSlowestWorker) {
  Fixture f(Consistency::kSsp, 2, /*staleness=*/2);
  // Both clocks 0: a reader at clock 2 may read, one at clock 3 may not.
  EXPECT_TRUE(f.policy->ready(2, f.dead));
  EXPECT_FALSE(f.policy->ready(3, f.dead));
  for (int64_t c = 0; c < 4; ++c) ASSERT_TRUE(f.push(0, c, {1, 1}).ok());  // worker 0 at clock 4
  EXPECT_FALSE(f.policy->ready(3, f.dead));                                // worker 1 still at 0
  ASSERT_TRUE(f.push(1, 0, {1, 1}).ok());                                  // worker 1 at clock 1
  EXPECT_TRUE(f.policy->ready(3, f.dead));
  EXPECT_FALSE(f.policy->ready(4, f.dead));
  EXPECT_EQ(f.slice.applied.size(), 5u);  // applied as in ASP
}

TEST(SspPolicy, ADeadWorkerIsNotWaitedFor) {
  Fixture f(Consistency::kSsp, 2, /*staleness=*/1);
  for (int64_t c = 0; c < 5; ++c) ASSERT_TRUE(f.push(0, c, {1, 1}).ok());
  EXPECT_FALSE(f.policy->ready(5, f.dead));
  f.dead[1] = 1;
  f.policy->on_worker_dead(1, f.dead, f.scratch);
  EXPECT_TRUE(f.policy->ready(6, f.dead));  // worker 0 at clock 5, staleness 1
  EXPECT_FALSE(f.policy->ready(7, f.dead));
  f.dead[0] = 1;
  EXPECT_TRUE(f.policy->ready(1000, f.dead));  // nobody left to wait for
}

TEST(SspPolicy, ClocksStartAtTheSliceVersionAfterARestore) {
  FakeSlice slice(2);
  slice.ver = 10;
  auto policy = make_consistency_policy({Consistency::kSsp, 2, 0, {}}, slice);
  DeadWorkers dead(2, 0);
  EXPECT_TRUE(policy->ready(10, dead));
  EXPECT_FALSE(policy->ready(11, dead));
}

TEST(AlignedFloats, ReadsAnAlignedPayloadInPlaceAndCopiesAnUnalignedOne) {
  alignas(float) char bytes[1 + 2 * sizeof(float)];
  const float v[2] = {1.5f, -2.0f};
  std::memcpy(bytes, v, sizeof(v));
  std::vector<float> scratch;
  zmq::message_t aligned(bytes, sizeof(v), nullptr);  // zero-copy: the frame points into `bytes`
  EXPECT_EQ(aligned_floats(aligned, scratch), reinterpret_cast<const float*>(bytes));
  std::memcpy(bytes + 1, v, sizeof(v));
  zmq::message_t unaligned(bytes + 1, sizeof(v), nullptr);
  const float* p = aligned_floats(unaligned, scratch);
  EXPECT_EQ(p, scratch.data());
  EXPECT_EQ(p[0], 1.5f);
  EXPECT_EQ(p[1], -2.0f);
}

}  // namespace
}  // namespace pshard
