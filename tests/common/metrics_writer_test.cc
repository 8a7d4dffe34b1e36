// MetricsWriter: JSON lines as written, epoch rows in the CSV; MetricsReader reads a diverged run back.
#include "common/metrics/metrics_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "common/metrics/metrics_reader.h"
#include "tests/support/metrics_events.h"

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(MetricsWriter, WritesJsonLinesAndEpochCsv) {
  std::string dir = "/tmp/pshard_metrics_test_" + std::to_string(::getpid()) + "/nested/run";
  pshard::Json workers = pshard::Json::array();
  workers.push(pshard::Json::object().set("rank", 0));
  const std::vector<pshard::Json> lines = {
      pshard::testing::minimal_event("step").set("loss", 2.5),
      pshard::testing::minimal_event("epoch").set("epoch", 1).set("test_acc", 0.75).set("workers", workers),
      pshard::testing::minimal_event("epoch").set("epoch", 2).set("test_acc", nullptr),
      pshard::testing::minimal_event("summary").set("test_acc", 0.75)};
  {
    pshard::MetricsWriter m(dir);
    for (const pshard::Json& line : lines) m.write(line);
    m.write_file("config.toml", "[run]\nname = \"x\"\n");
  }
  std::string jsonl;
  for (const pshard::Json& line : lines) jsonl += line.dump() + "\n";
  EXPECT_EQ(read_all(dir + "/metrics.jsonl"), jsonl);
  // The CSV: the epoch lines' fields but the lists (workers, hosts, ...), in the first epoch line's order.
  std::string header, row1, row2;
  for (const auto& [key, value] : lines[1].items()) {
    if (value.is_array() || value.is_object()) continue;
    header += (header.empty() ? "" : ",") + key;
    const std::string v1 = value.is_string() ? value.as_string() : value.dump();
    const pshard::Json& second = lines[2].at(key);
    const std::string v2 = second.is_null() ? "" : second.is_string() ? second.as_string() : second.dump();
    row1 += (row1.empty() ? "" : ",") + v1;
    row2 += (row2.empty() ? "" : ",") + v2;
  }
  EXPECT_EQ(read_all(dir + "/metrics.csv"), header + "\n" + row1 + "\n" + row2 + "\n");
  EXPECT_NE(header.find("test_acc"), std::string::npos);
  EXPECT_NE(row2.find("epoch,2,"), std::string::npos) << row2;
  EXPECT_EQ(read_all(dir + "/config.toml"), "[run]\nname = \"x\"\n");
  std::string cleanup = "rm -rf /tmp/pshard_metrics_test_" + std::to_string(::getpid());
  EXPECT_EQ(std::system(cleanup.c_str()), 0);
}

// A line off its declaration (docs/METRICS.md) is refused before anything is written: a writer that drifted fails.
TEST(MetricsWriter, ALineOffTheDeclarationIsRefusedAndNotWritten) {
  const std::string dir = "/tmp/pshard_metrics_refused_test_" + std::to_string(::getpid());
  {
    pshard::MetricsWriter m(dir);
    EXPECT_THROW(m.write(pshard::Json::object().set("event", "epoch").set("epoch", 1)), pshard::Error);
    EXPECT_THROW(m.write(pshard::testing::minimal_event("epoch").set("accuracy", 0.5)), pshard::Error);
  }
  EXPECT_EQ(read_all(dir + "/metrics.jsonl"), "");
  std::filesystem::remove_all(dir);
}

TEST(MetricsReader, ANonFiniteStepLossReadsBackAsNaN) {
  // A diverged run: the writer prints NaN as "nan" (JSON has no NaN); the reader keeps the step as NaN (a gap
  // in a chart) instead of rejecting the run, and reads the null of older runs the same way, but a missing loss is
  // still an error naming the line.
  std::string dir = "/tmp/pshard_metrics_nan_test_" + std::to_string(::getpid());
  {
    pshard::MetricsWriter m(dir);
    m.write(pshard::testing::minimal_event("step").set("epoch", 1).set("step", 0).set("loss", 2.5).set("wall_s", 0.1));
    m.write(pshard::testing::minimal_event("step")
                .set("epoch", 1)
                .set("step", 7)
                .set("loss", std::nan(""))
                .set("wall_s", 0.2));
  }
  EXPECT_NE(read_all(dir + "/metrics.jsonl").find("\"loss\":\"nan\""), std::string::npos);
  std::ofstream(dir + "/metrics.jsonl", std::ios::app)
      << "{\"event\":\"step\",\"epoch\":1,\"step\":8,\"loss\":\"-inf\",\"wall_s\":0.3}\n"
      << "{\"event\":\"step\",\"epoch\":1,\"step\":9,\"loss\":null,\"wall_s\":0.4}\n";
  pshard::RunMetrics run = pshard::read_run(dir);
  ASSERT_EQ(run.steps.size(), 4u);
  EXPECT_EQ(run.steps[0].loss, 2.5);
  EXPECT_TRUE(std::isnan(run.steps[1].loss));
  EXPECT_EQ(run.steps[2].loss, -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(run.steps[3].loss));
  std::ofstream(dir + "/metrics.jsonl", std::ios::app) << "{\"event\":\"step\",\"epoch\":1,\"step\":10,\"wall_s\":1}\n";
  try {
    pshard::read_run(dir);
    FAIL() << "a step without a loss was accepted";
  } catch (const pshard::Error& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl:5: field 'loss': missing"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

// A full disk (here /dev/full: every write is ENOSPC) is logged once per file with its path, and
// complete() says the records are incomplete; nothing throws, training goes on.
TEST(MetricsWriter, AFailedWriteIsLoggedOnceWithThePathAndMakesTheRecordsIncomplete) {
  const std::string dir = "/tmp/pshard_metrics_full_test_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::create_symlink("/dev/full", dir + "/metrics.jsonl");
  std::filesystem::create_symlink("/dev/full", dir + "/metrics.csv");
  testing::internal::CaptureStderr();
  {
    pshard::MetricsWriter m(dir);
    EXPECT_TRUE(m.complete());
    for (int epoch = 1; epoch <= 3; ++epoch) m.write(pshard::testing::minimal_event("epoch").set("epoch", epoch));
    EXPECT_FALSE(m.complete());
  }
  const std::string log = testing::internal::GetCapturedStderr();
  for (const std::string file : {"metrics.jsonl", "metrics.csv"}) {
    const std::string line = "metrics " + dir + "/" + file +
                             ": write failed: No space left on device; no more lines go to it, the run's records "
                             "are incomplete";
    const size_t at = log.find(line);
    EXPECT_NE(at, std::string::npos) << log;
    EXPECT_EQ(log.find(line, at + 1), std::string::npos) << "logged more than once:\n" << log;
  }
  std::filesystem::remove_all(dir);
}

// What a full disk leaves: a last line cut short. The reader skips it and says so; a bad line
// anywhere else is still an error.
TEST(MetricsReader, ATornLastLineIsSkippedAndReportedNotAnError) {
  const std::string dir = "/tmp/pshard_metrics_torn_test_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string good = "{\"event\":\"epoch\",\"epoch\":1,\"step\":10}\n";
  std::ofstream(dir + "/metrics.jsonl") << good << good << "{\"event\":\"epoch\",\"ep";
  pshard::RunMetrics run = pshard::read_run(dir);
  EXPECT_EQ(run.epochs.size(), 2u);
  EXPECT_EQ(run.torn_last_line, dir +
                                    "/metrics.jsonl:3: the last line is cut short (its writer stopped mid-line, "
                                    "e.g. on a full disk): skipped, the run's records are incomplete");
  std::ofstream(dir + "/metrics.jsonl") << good << "{\"event\":\"epoch\",\"ep\n" << good;
  try {
    pshard::read_run(dir);
    FAIL() << "a torn line in the middle was accepted";
  } catch (const pshard::Error& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl:2"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(MetricsWriter, UnwritableDirectoryIsAnError) {
  EXPECT_THROW(pshard::MetricsWriter("/proc/pshard_cannot_exist/run"), pshard::Error);
}

}  // namespace
