// The start rules of a worker session (worker/session/worker_session.h), without a job: which starts are refused and
// in what words.
#include "worker/session/worker_session.h"

#include <gtest/gtest.h>

#include <string>

namespace pshard {
namespace {

// The refusal's text, or "" when the start is taken.
std::string refusal(bool elastic, const StartRequest& request, int64_t total_steps) {
  try {
    check_start(elastic, request, total_steps);
  } catch (const StartRefused& e) {
    return e.what();
  }
  return "";
}

TEST(WorkerSessionStart, FreshResumedAndRejoiningStartsOfAFixedJobAreTaken) {
  EXPECT_EQ(refusal(false, StartRequest{}, 100), "");
  EXPECT_EQ(refusal(false, StartRequest{50, false, ""}, 100), "");
  EXPECT_EQ(refusal(false, StartRequest{100, false, ""}, 100), "");  // resumed at the end: nothing left to train
  EXPECT_EQ(refusal(false, StartRequest{0, true, ""}, 100), "");
  EXPECT_EQ(refusal(false, StartRequest{5000, false, ""}, 0), "");  // a program that did not declare its length
  EXPECT_EQ(refusal(true, StartRequest{}, 0), "");
}

TEST(WorkerSessionStart, AResumePastTheRunsEndIsRefused) {
  EXPECT_EQ(refusal(false, StartRequest{101, false, ""}, 100), "the run resumes at step 101, past its end (100 steps)");
}

TEST(WorkerSessionStart, AnElasticJobIsNeitherResumedNorRestarted) {
  EXPECT_EQ(refusal(true, StartRequest{40, false, ""}, 0),
            "an elastic job (cluster.min_workers > 0) cannot be resumed (start step 40): its epochs' members are not "
            "recorded in the checkpoints; workers join it as new ones (pshard join)");
  EXPECT_NE(refusal(true, StartRequest{0, true, ""}, 0).find("cannot be restarted"), std::string::npos);
}

// What both front ends tell the coordinator as they leave (WorkerSession::leave).
TEST(WorkerSessionLeave, AWorkerTellsItsHighestPushedStepPlusOneAtLeastItsStart) {
  EXPECT_EQ(steps_to_tell(true, false, 0, 40), 40);
  EXPECT_EQ(steps_to_tell(true, false, 30, 40), 40);
  EXPECT_EQ(steps_to_tell(true, false, 30, 0), 30);  // resumed at step 30, left before pushing
  EXPECT_EQ(steps_to_tell(false, false, 0, 0), -1);  // never started: a joiner that came too late, an error
  EXPECT_EQ(steps_to_tell(true, true, 0, 40), -1);   // an elastic job's members train different steps
}

}  // namespace
}  // namespace pshard
