// Worker epoch reports read from JSON (what the coordinator receives): counts out of range are errors.
#include "common/metrics/epoch_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "common/error.h"
#include "common/metrics/progress.h"

namespace pshard {
namespace {

WorkerEpochReport sample() {
  WorkerEpochReport r;
  r.rank = 2;
  r.epoch = 3;
  r.step = 120;
  r.steps = 40;
  r.host = 2;
  r.samples = 640;
  r.loss_sum = 12.5;
  r.correct = 500;
  r.bytes_sent = 1 << 20;
  r.bytes_recv = 1 << 21;
  r.fp32_bytes_sent = 1 << 21;
  r.fp32_bytes_recv = 1 << 22;
  r.shm_bytes_sent = 3 << 20;
  r.shm_bytes_recv = 5 << 20;
  r.lr = 0.05;
  return r;
}

std::string error_of(const Json& j) {
  try {
    WorkerEpochReport::from_json(j);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(WorkerEpochReport, RoundTripsThroughJson) {
  WorkerEpochReport back = WorkerEpochReport::from_json(Json::parse(sample().to_json().dump(), "test"));
  EXPECT_EQ(back.rank, 2u);
  EXPECT_EQ(back.epoch, 3);
  EXPECT_EQ(back.step, 120);
  EXPECT_EQ(back.samples, 640);
  EXPECT_DOUBLE_EQ(back.loss_sum, 12.5);
  EXPECT_EQ(back.bytes_recv, uint64_t(1) << 21);
  EXPECT_EQ(back.fp32_bytes_sent, uint64_t(1) << 21);
  EXPECT_EQ(back.fp32_bytes_recv, uint64_t(1) << 22);
  EXPECT_EQ(back.shm_bytes_sent, uint64_t(3) << 20);
  EXPECT_EQ(back.shm_bytes_recv, uint64_t(5) << 20);
  EXPECT_EQ(back.steps, 40);
  EXPECT_EQ(back.host, 2u);
  // The epoch line adds them up over the workers, apart from the socket bytes.
  WorkerEpochReport other = sample();
  other.rank = 3;
  const Json e = combine_epoch({sample(), other});
  EXPECT_EQ(e.at("shm_bytes_sent").as_number(), 2.0 * (3 << 20));
  EXPECT_EQ(e.at("bytes_sent").as_number(), 2.0 * (1 << 20));
}

// Two hosts of two workers each, under host aggregation: the leader of each host moves the network bytes, both move
// shared-memory bytes. Per host and per step, the busiest host's figures; the run's summary divides by every step.
TEST(WorkerEpochReport, BytesAreSummedPerHostAndGivenPerStepForTheBusiestHost) {
  std::vector<WorkerEpochReport> reports;
  for (uint32_t rank = 0; rank < 4; ++rank) {
    WorkerEpochReport r = sample();
    r.rank = rank;
    r.host = rank < 2 ? 0 : 2;
    const bool leader = rank % 2 == 0;
    r.bytes_sent = leader ? 4000 : 0;
    r.bytes_recv = leader ? 4000 + rank : 0;  // host 2's leader moved 2 more bytes
    r.shm_bytes_sent = leader ? 4000 : 4000;
    r.shm_bytes_recv = leader ? 4000 : 4000;
    r.steps = 10;
    reports.push_back(r);
  }
  const Json e = combine_epoch(reports);
  ASSERT_EQ(e.at("hosts").size(), 2u);
  const Json& b = e.at("hosts").elements()[1];
  EXPECT_EQ(b.at("host").as_number(), 2);
  EXPECT_EQ(b.at("workers").as_number(), 2);
  EXPECT_EQ(b.at("bytes_recv").as_number(), 4002);
  EXPECT_EQ(b.at("shm_bytes_sent").as_number(), 8000);
  EXPECT_EQ(e.at("steps").as_number(), 10);
  EXPECT_DOUBLE_EQ(e.at("network_bytes_per_host_step").as_number(), 800.2);
  EXPECT_DOUBLE_EQ(e.at("shm_bytes_per_host_step").as_number(), 1600);
  RunTotals totals;
  totals.add_epoch(e);
  totals.add_epoch(e);
  const Json s = totals.summary(1.0);
  EXPECT_EQ(s.at("num_hosts").as_number(), 2);
  EXPECT_DOUBLE_EQ(s.at("network_bytes_per_host_step").as_number(), 800.2);
  EXPECT_DOUBLE_EQ(s.at("shm_bytes_per_host_step").as_number(), 1600);
}

// A figure a worker did not measure is absent, never a zero: each figure of the epoch line combines the workers
// that measured it, and a non-finite loss stays non-finite (written as "nan"), also through the JSON between them.
TEST(WorkerEpochReport, EachFigureCombinesTheWorkersThatMeasuredIt) {
  WorkerEpochReport a = sample(), b = sample();
  a.rank = 0;
  a.samples = 10;
  a.loss_sum = 10;
  a.has_train_acc = false;
  a.evaluated = true;
  a.test_n = 100;
  a.has_test_loss = false;
  a.test_correct = 50;
  b.rank = 1;
  b.samples = 30;
  b.loss_sum = 90;
  b.correct = 15;
  b.evaluated = true;
  b.test_n = 100;
  b.test_loss_sum = 20;
  b.has_test_acc = false;
  b.test_correct = 0;
  Json e = combine_epoch({WorkerEpochReport::from_json(Json::parse(a.to_json().dump(), "a")),
                          WorkerEpochReport::from_json(Json::parse(b.to_json().dump(), "b"))});
  EXPECT_DOUBLE_EQ(e.at("train_loss").as_number(), 100.0 / 40);
  EXPECT_DOUBLE_EQ(e.at("train_acc").as_number(), 15.0 / 30);
  EXPECT_DOUBLE_EQ(e.at("test_loss").as_number(), 20.0 / 100);
  EXPECT_DOUBLE_EQ(e.at("test_acc").as_number(), 50.0 / 100);
  EXPECT_EQ(e.at("samples").as_int(), 40);

  a.has_train_loss = false;
  a.evaluated = false;
  Json only_a = combine_epoch({a});
  for (const char* figure : {"train_loss", "train_acc", "test_loss", "test_acc"}) {
    EXPECT_TRUE(only_a.at(figure).is_null()) << figure << ": " << only_a.dump();
  }

  b.loss_sum = std::numeric_limits<double>::quiet_NaN();
  b.test_loss_sum = std::numeric_limits<double>::infinity();
  const WorkerEpochReport back = WorkerEpochReport::from_json(Json::parse(b.to_json().dump(), "b"));
  EXPECT_TRUE(std::isnan(back.loss_sum));
  Json diverged = combine_epoch({a, back});
  EXPECT_NE(diverged.dump().find("\"train_loss\":\"nan\""), std::string::npos) << diverged.dump();
  EXPECT_NE(diverged.dump().find("\"test_loss\":\"inf\""), std::string::npos) << diverged.dump();
}

// The job's epoch line carries each worker's measured phases and their mean.
TEST(WorkerEpochReport, PhasesRoundTripAndCombineAsMeans) {
  WorkerEpochReport a = sample(), b = sample();
  b.rank = 3;
  a.epoch_s = 2.0;
  b.epoch_s = 4.0;
  a.phases[WorkerPhase::kForward] = 1.0;
  a.phases[WorkerPhase::kOther] = 1.0;
  b.phases[WorkerPhase::kForward] = 2.0;
  b.phases[WorkerPhase::kCommWait] = 2.0;
  WorkerEpochReport back = WorkerEpochReport::from_json(Json::parse(b.to_json().dump(), "test"));
  EXPECT_DOUBLE_EQ(back.phases[WorkerPhase::kCommWait], 2.0);
  EXPECT_DOUBLE_EQ(back.phases.total(), 4.0);
  Json e = combine_epoch({b, a});
  EXPECT_DOUBLE_EQ(e.at("forward_s").as_number(), 1.5);
  EXPECT_DOUBLE_EQ(e.at("comm_wait_s").as_number(), 1.0);
  EXPECT_DOUBLE_EQ(e.at("other_s").as_number(), 0.5);
  EXPECT_DOUBLE_EQ(e.at("data_s").as_number(), 0.0);
  EXPECT_FALSE(e.has("compute_s"));
  const Json& w = e.at("workers").elements()[1];  // rank order
  EXPECT_EQ(w.at("rank").as_int(), 3);
  EXPECT_DOUBLE_EQ(w.at("epoch_s").as_number(), 4.0);
  EXPECT_DOUBLE_EQ(w.at("comm_wait_s").as_number(), 2.0);
  Json missing = b.to_json();
  missing = Json::parse(missing.dump().replace(missing.dump().find("\"backward_s\""), 12, "\"backward_x\""), "t");
  EXPECT_NE(error_of(missing).find("field 'backward_s'"), std::string::npos) << error_of(missing);
}

// Seen while writing fuzz_control_message: a report with "rank": -1 or "step": 1e300 was cast to
// an integer type (undefined behaviour) instead of being refused.
TEST(WorkerEpochReport, CountsOutOfRangeAreErrorsNamingTheField) {
  Json j = sample().to_json();
  j.set("rank", -1.0);
  std::string e = error_of(j);
  EXPECT_NE(e.find("field 'rank'"), std::string::npos) << e;
  EXPECT_NE(e.find("not a whole number in [0, 4294967295]"), std::string::npos) << e;
  j = sample().to_json();
  j.set("step", 1e300);
  EXPECT_NE(error_of(j).find("field 'step'"), std::string::npos);
  j = sample().to_json();
  j.set("bytes_sent", 2.5);
  EXPECT_NE(error_of(j).find("field 'bytes_sent'"), std::string::npos);
  j = sample().to_json();
  j.set("samples", 9007199254740992.0);  // 2^53 is still fine
  EXPECT_EQ(error_of(j), "");
}

// Loss scaling's figures: absent unless the workers scale their loss; the epoch takes the workers' (equal in a sync
// job) and the summary adds the skipped steps of every epoch and keeps the last scale.
TEST(WorkerEpochReport, LossScaleAndSkippedStepsReachTheEpochAndTheSummary) {
  EXPECT_FALSE(sample().to_json().has("loss_scale"));
  EXPECT_FALSE(combine_epoch({sample()}).has("skipped_steps"));
  WorkerEpochReport a = sample(), b = sample();
  a.has_loss_scale = b.has_loss_scale = true;
  a.loss_scale = b.loss_scale = 2048;
  a.skipped_steps = b.skipped_steps = 3;
  b.rank = 3;
  const WorkerEpochReport back = WorkerEpochReport::from_json(a.to_json());
  EXPECT_TRUE(back.has_loss_scale);
  EXPECT_EQ(back.loss_scale, 2048);
  EXPECT_EQ(back.skipped_steps, 3);
  const Json e1 = combine_epoch({a, b});
  EXPECT_EQ(e1.at("loss_scale").as_number(), 2048);
  EXPECT_EQ(e1.at("skipped_steps").as_int(), 3);
  a.loss_scale = b.loss_scale = 4096;
  a.skipped_steps = b.skipped_steps = 1;
  RunTotals totals;
  totals.add_epoch(e1);
  totals.add_epoch(combine_epoch({a, b}));
  const Json s = totals.summary(10.0);
  EXPECT_EQ(s.at("skipped_steps").as_int(), 4);
  EXPECT_EQ(s.at("loss_scale").as_number(), 4096);
  Json bad = a.to_json();
  bad.set("loss_scale", -1.0);
  EXPECT_NE(error_of(bad).find("field 'loss_scale'"), std::string::npos);
  bad = a.to_json();
  bad.set("skipped_steps", 0.5);
  EXPECT_NE(error_of(bad).find("field 'skipped_steps'"), std::string::npos);
}

// A program's own figures (an AUC): weighted by the test samples behind them, by the samples where a worker did
// not evaluate; only the workers that named one count; the summary keeps the last epoch's; bad names are refused.
TEST(WorkerEpochReport, AProgramsOwnFiguresAreWeightedByTheSamplesBehindThem) {
  EXPECT_FALSE(combine_epoch({sample()}).has("figures"));
  WorkerEpochReport a = sample(), b = sample(), c = sample(), d = sample();
  b.rank = 3;
  c.rank = 4;
  d.rank = 5;
  a.evaluated = b.evaluated = true;
  a.test_n = 100;
  b.test_n = 300;
  a.figures = {{"test_auc", 0.7}, {"test_logloss", 0.5}};
  b.figures = {{"test_auc", 0.8}};
  c.evaluated = false;  // weighted by its samples
  c.samples = 400;
  c.figures = {{"train_auc", 0.9}};
  d.figures = {};  // named none: not counted
  const WorkerEpochReport back = WorkerEpochReport::from_json(a.to_json());
  EXPECT_EQ(back.figures, a.figures);
  const Json e = combine_epoch({a, b, c, d});
  EXPECT_NEAR(e.at("figures").at("test_auc").as_number(), (0.7 * 100 + 0.8 * 300) / 400, 1e-12);
  EXPECT_DOUBLE_EQ(e.at("figures").at("test_logloss").as_number(), 0.5);
  EXPECT_DOUBLE_EQ(e.at("figures").at("train_auc").as_number(), 0.9);
  EXPECT_NE(format_epoch_line(e, 10).find("test_auc 0.7750  test_logloss 0.5000  train_auc 0.9000"), std::string::npos)
      << format_epoch_line(e, 10);
  RunTotals totals;
  totals.add_epoch(e);
  a.figures["test_auc"] = 0.75;
  const Json last = combine_epoch({a});
  totals.add_epoch(last);
  EXPECT_EQ(totals.summary(1.0).at("figures").dump(), last.at("figures").dump());
  for (const char* name : {"1st", "with space", "a-b", ""}) {
    Json bad = a.to_json();
    bad.set("figures", Json::object().set(name, 1.0));
    EXPECT_NE(error_of(bad).find("a name of [A-Za-z0-9_] starting with a letter"), std::string::npos) << name;
  }
  Json bad = a.to_json();
  bad.set("figures", Json::object().set("auc", "high"));
  EXPECT_NE(error_of(bad).find("figure 'auc'"), std::string::npos);
  Json many = Json::object();
  for (int i = 0; i <= 16; ++i) many.set("f" + std::to_string(i), 1.0);
  bad.set("figures", many);
  EXPECT_NE(error_of(bad).find("at most 16"), std::string::npos);
  EXPECT_TRUE(valid_figure_name(std::string(64, 'a')));
  EXPECT_FALSE(valid_figure_name(std::string(65, 'a')));
}

TEST(Json, AsIntRefusesValuesOutsideInt64) {
  EXPECT_EQ(Json::parse("-9223372036854775808", "t").as_int(), INT64_MIN);
  EXPECT_THROW(Json::parse("9223372036854775808", "t").as_int(), Error);
  EXPECT_THROW(Json::parse("1e300", "t").as_int(), Error);
  EXPECT_THROW(Json::parse("-1e19", "t").as_int(), Error);
}

// An aborted job's summary line must not read like a finished one ("done: ...").
TEST(EpochLine, SaysTheLossScaleAndTheSkippedStepsWhenTheLossIsScaled) {
  Json e = Json::object().set("epoch", 2).set("test_acc", 0.5).set("epoch_s", 3.0);
  EXPECT_EQ(format_epoch_line(e, 5).find("loss scale"), std::string::npos) << format_epoch_line(e, 5);
  e.set("loss_scale", 32768.0).set("skipped_steps", 3);
  const std::string line = format_epoch_line(e, 5);
  EXPECT_EQ(line.rfind("epoch 2/5  train loss - acc -  test loss - acc 50.00%", 0), 0u) << line;
  EXPECT_NE(line.find("3.0 s  loss scale 32768, 3 steps skipped"), std::string::npos) << line;
}

// A program's report gives its losses as means (PSHARD_LOSS_MEANS): combined like sums, and a mean near the largest
// double is recorded as given, where its sum over the samples would have overflowed to inf.
TEST(WorkerEpochReport, LossMeansCombineAsSumsWithoutOverflow) {
  WorkerEpochReport a = sample(), b = sample();
  b.rank = 3;
  a.samples = 100;
  b.samples = 300;
  a.loss_sum = 200.0;   // as sums: mean 2
  b.loss_sum = 1800.0;  // mean 6
  const double as_sums = combine_epoch({a, b}).at("train_loss").as_number();
  EXPECT_DOUBLE_EQ(as_sums, 5.0);  // (200 + 1800) / 400
  a.loss_means = b.loss_means = true;
  a.loss_sum = 2.0;
  b.loss_sum = 6.0;
  WorkerEpochReport back = WorkerEpochReport::from_json(a.to_json());
  EXPECT_TRUE(back.loss_means);
  EXPECT_DOUBLE_EQ(combine_epoch({back, b}).at("train_loss").as_number(), as_sums);
  a.loss_sum = b.loss_sum = 1e308;
  a.evaluated = b.evaluated = true;
  a.test_n = b.test_n = 1000000;
  a.test_loss_sum = b.test_loss_sum = 1.5e308;
  const Json e = combine_epoch({a, b});
  EXPECT_DOUBLE_EQ(e.at("train_loss").as_number(), 1e308) << e.dump();
  EXPECT_DOUBLE_EQ(e.at("test_loss").as_number(), 1.5e308) << e.dump();
}

// The epoch line keeps a program's own numbering: "epoch" as given, its place in the run beside it where they differ.
TEST(WorkerEpochReport, AProgramsEpochNumberIsRecordedAsGiven) {
  WorkerEpochReport r = sample();
  r.epoch = 1;
  r.label = 0;
  const WorkerEpochReport back = WorkerEpochReport::from_json(r.to_json());
  ASSERT_TRUE(back.label.has_value());
  EXPECT_EQ(*back.label, 0);
  Json e = combine_epoch({back});
  EXPECT_EQ(e.at("epoch").as_int(), 0);
  EXPECT_EQ(e.at("epoch_index").as_int(), 1);
  EXPECT_EQ(format_epoch_line(e, 8).rfind("epoch 0 (1 of 8)  train loss", 0), 0u) << format_epoch_line(e, 8);
  EXPECT_EQ(format_epoch_line(e, 0).rfind("epoch 0  train loss", 0), 0u) << format_epoch_line(e, 0);
  r.label = 1;  // numbered from 1: the place in the run
  e = combine_epoch({WorkerEpochReport::from_json(r.to_json())});
  EXPECT_FALSE(e.has("epoch_index"));
  EXPECT_EQ(format_epoch_line(e, 8).rfind("epoch 1/8  train loss", 0), 0u) << format_epoch_line(e, 8);
  EXPECT_FALSE(WorkerEpochReport::from_json(sample().to_json()).label.has_value());  // pshard's own workers
  Json bad = r.to_json();
  bad.set("label", 0.5);
  EXPECT_NE(error_of(bad).find("field 'label'"), std::string::npos) << error_of(bad);
}

TEST(SummaryLine, AnAbortedRunSaysAbortedAndWhyNotDone) {
  Json s = Json::object().set("test_acc", 0.5).set("test_loss", 1.25).set("epochs", 2).set("wall_s", 3.0);
  EXPECT_EQ(format_summary_line(s, "runs/x").rfind("done: test accuracy 50.00% (loss 1.2500), 2 epochs", 0), 0u)
      << format_summary_line(s, "runs/x");
  s.set("aborted", "worker 1 is dead");
  EXPECT_EQ(
      format_summary_line(s, "runs/x")
          .rfind("aborted (worker 1 is dead): after the epochs it finished, test accuracy 50.00% (loss 1.2500)", 0),
      0u)
      << format_summary_line(s, "runs/x");
}

}  // namespace
}  // namespace pshard
