// The launch progress line: following metrics.jsonl as it grows, the line's
// numbers, and the terminal status redrawn around printed lines.
#include "launcher/progress.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace {

using pshard::Json;

TEST(MetricsFollower, ReturnsOnlyCompleteNewLines) {
  const std::string path = "/tmp/pshard-progress-test-" + std::to_string(::getpid()) + ".jsonl";
  std::remove(path.c_str());
  pshard::MetricsFollower f(path);
  EXPECT_TRUE(f.poll().empty());  // no file yet
  {
    std::ofstream out(path);
    out << "{\"event\":\"start\",\"epochs\":2}\n{\"event\":\"step\",\"st";
  }
  std::vector<Json> got = f.poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].at("event").as_string(), "start");
  {
    std::ofstream out(path, std::ios::app);
    out << "ep\":7}\n";
  }
  got = f.poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].at("step").as_int(), 7);
  EXPECT_TRUE(f.poll().empty());
  std::remove(path.c_str());
}

TEST(ProgressState, LineHasEpochStepLossRateAndEta) {
  pshard::ProgressState p;
  EXPECT_FALSE(p.line().has_value());
  p.add(Json::parse(R"({"event":"start","epochs":2,"steps_per_epoch":100,"global_batch":128})", "t"));
  p.add(Json::parse(R"({"event":"step","epoch":1,"step":49,"loss":0.5,"wall_s":10})", "t"));
  // 50 steps x 128 samples in 10 s = 640 samples/s; 150 steps left at 0.2 s each = 30 s.
  EXPECT_EQ(*p.line(), "epoch 1/2  step 50/200  loss 0.5000  640 samples/s  ETA 0:30");
  p.add(Json::parse(R"({"event":"summary","test_acc":0.9})", "t"));
  EXPECT_DOUBLE_EQ(p.summary().at("test_acc").as_number(), 0.9);
}

// The coordinator's record of a server's death, in its words, until the next try's start line; a worker's is not one.
TEST(ProgressState, KeepsTheFirstServerFailureOfATry) {
  pshard::ProgressState p;
  p.add(Json::parse(R"({"event":"start","epochs":2,"steps_per_epoch":100,"global_batch":128})", "t"));
  p.add(Json::parse(R"({"event":"failure","role":"worker","rank":0,"host":"a","pid":5,"verdict":"dead","why":"x"})",
                    "t"));
  EXPECT_FALSE(p.server_failed());
  p.add(Json::parse(
      R"({"event":"failure","role":"server","rank":1,"host":"h2","pid":7,"verdict":"dead","why":"no heartbeat"})",
      "t"));
  p.add(Json::parse(R"({"event":"failure","role":"server","rank":0,"host":"h1","pid":6,"verdict":"dead","why":"y"})",
                    "t"));
  EXPECT_TRUE(p.server_failed());
  EXPECT_EQ(p.server_failure(), "server 1 (host h2, pid 7) is dead: no heartbeat");
  p.add(Json::parse(R"({"event":"start","epochs":2,"steps_per_epoch":100,"global_batch":128})", "t"));
  EXPECT_FALSE(p.server_failed());
}

// A program that declared no length (train.epochs unset: the start event says 0 epochs): no "of N", no ETA.
TEST(ProgressState, AProgramWithoutADeclaredLengthShowsNoTotals) {
  pshard::ProgressState p;
  p.add(Json::parse(R"({"event":"start","epochs":0,"steps_per_epoch":0,"global_batch":128,"program":true})", "t"));
  p.add(Json::parse(R"({"event":"step","epoch":3,"step":119,"loss":0.25,"wall_s":12})", "t"));
  ASSERT_TRUE(p.line());
  EXPECT_EQ(*p.line(), "epoch 3  step 120  loss 0.2500  1280 samples/s  ETA -");
}

// Elastic jobs: each epoch's plan (a `members` event) changes the global batch and the run's length.
TEST(ProgressState, AnElasticJobsPlansSetTheRateAndTheLength) {
  pshard::ProgressState p;
  p.add(Json::parse(R"({"event":"start","epochs":3,"steps_per_epoch":100,"global_batch":128})", "t"));
  p.add(Json::parse(R"({"event":"members","epoch":1,"first_step":0,"steps":100,"global_batch":128})", "t"));
  p.add(Json::parse(R"({"event":"members","epoch":2,"first_step":100,"steps":66,"global_batch":192})", "t"));
  p.add(Json::parse(R"({"event":"step","epoch":2,"step":149,"loss":0.5,"wall_s":20})", "t"));
  // 100 x 128 + 50 x 192 = 22,400 samples in 20 s; 100 + 2 x 66 = 232 steps, 150 done at 0.133 s each.
  EXPECT_EQ(*p.line(), "epoch 2/3  step 150/232  loss 0.5000  1120 samples/s  ETA 0:10");
}

TEST(ProgressState, AStallNamesTheMissingWorkerUntilTheJobMovesOn) {
  pshard::ProgressState p;
  p.add(Json::parse(R"({"event":"stall","server":0,"step":0,"waited_s":5.04,"missing":[0],"initial_weights":true,)"
                    R"("last_heard_s":[0.25]})",
                    "t"));
  EXPECT_EQ(*p.line(), "waiting 5.0 s for worker 0 (last heard 0.2 s ago)'s initial weights");
  p.add(Json::parse(R"({"event":"start","epochs":2,"steps_per_epoch":100,"global_batch":128})", "t"));
  p.add(Json::parse(R"({"event":"step","epoch":1,"step":49,"loss":0.5,"wall_s":10})", "t"));
  EXPECT_EQ(*p.line(), "epoch 1/2  step 50/200  loss 0.5000  640 samples/s  ETA 0:30");
  p.add(Json::parse(R"({"event":"stall","server":1,"step":51,"waited_s":10.0,"missing":[1,3],)"
                    R"("initial_weights":false,"last_heard_s":[4.2,null]})",
                    "t"));
  EXPECT_EQ(*p.line(),
            "epoch 1/2  step 50/200  loss 0.5000  640 samples/s  ETA 0:30  waiting 10.0 s for workers 1 (last heard "
            "4.2 s ago), 3");
  p.add(Json::parse(R"({"event":"step","epoch":1,"step":59,"loss":0.5,"wall_s":12})", "t"));
  EXPECT_EQ(p.line()->find("waiting"), std::string::npos) << *p.line();
}

std::string drain(int fd) {
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST(TerminalStatus, TtyRedrawsStatusAroundPrintedLines) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  {
    pshard::TerminalStatus t(fds[1], /*is_tty=*/true);
    t.set("[progress] a");
    t.print(fds[1], "[worker 0] hello\n");
    t.clear();
  }
  ::close(fds[1]);
  EXPECT_EQ(drain(fds[0]), "\r\033[K[progress] a\r\033[K[worker 0] hello\n[progress] a\r\033[K");
  ::close(fds[0]);
}

TEST(TerminalStatus, PlainOutputPrintsStatusLinesAtMostEveryPeriod) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  {
    pshard::TerminalStatus t(fds[1], /*is_tty=*/false, /*plain_every_s=*/3600);
    t.set("[progress] a");
    t.set("[progress] b");  // within the period: not printed
    t.print(fds[1], "line\n");
  }
  ::close(fds[1]);
  EXPECT_EQ(drain(fds[0]), "[progress] a\nline\n");
  ::close(fds[0]);
}

}  // namespace
