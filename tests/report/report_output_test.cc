// report.md, CSV tables and PNG charts written by write_report; malformed metrics are errors naming file and line.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>

#include "common/error.h"
#include "report/report.h"
#include "tests/support/report_fixtures.h"

namespace pshard::report {
namespace {

using testing::TempDir;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

uint32_t big_endian32(const std::string& s, size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) | (uint32_t(uint8_t(s[at + 2])) << 8) |
         uint32_t(uint8_t(s[at + 3]));
}

// Checks the PNG signature, the IHDR chunk and the IEND trailer; returns {width, height}.
std::pair<uint32_t, uint32_t> png_size(const std::string& path) {
  std::string png = read_file(path);
  EXPECT_GT(png.size(), 45u) << path;
  if (png.size() <= 45) return {0, 0};
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << path;
  EXPECT_EQ(big_endian32(png, 8), 13u) << path;  // IHDR length
  EXPECT_EQ(png.substr(12, 4), "IHDR") << path;
  EXPECT_EQ(png.substr(png.size() - 8, 4), "IEND") << path;
  return {big_endian32(png, 16), big_endian32(png, 20)};
}

// The value of `column` in the row whose `key_column` equals `key`.
std::string csv_value(const std::string& path, const std::string& key_column, const std::string& key,
                      const std::string& column) {
  std::istringstream in(read_file(path));
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  std::stringstream h(line);
  for (std::string c; std::getline(h, c, ',');) header.push_back(c);
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream r(line);
    for (std::string c; std::getline(r, c, ',');) cells.push_back(c);
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    if (row[key_column] == key) return row[column];
  }
  return "<no row " + key + ">";
}

TEST(ReportOutput, WritesTablesAndPngChartsOfTheStatedSize) {
  TempDir tmp;
  std::vector<std::string> dirs = testing::write_scaling_fixture(tmp.path());
  ReportOptions o;
  o.out_dir = tmp.path() + "/report";
  o.plot_width = 800;
  o.plot_height = 500;
  ReportResult r = write_report(dirs, o);

  ASSERT_TRUE(r.plots_drawn) << r.plots_note << "\n" << read_file(o.out_dir + "/plots.log");
  std::map<std::string, std::pair<uint32_t, uint32_t>> expected = {
      {"loss_vs_step.png", {800, 500}},        {"loss_vs_time.png", {800, 500}}, {"loss_vs_epoch.png", {800, 500}},
      {"accuracy_vs_epoch.png", {800, 500}},   {"scaling.png", {800, 750}},      {"bandwidth.png", {800, 750}},
      {"throughput_vs_batch.png", {800, 500}}, {"step_times.png", {800, 500}}};
  EXPECT_EQ(r.pngs.size(), expected.size());
  for (const auto& [name, size] : expected) {
    EXPECT_EQ(png_size(o.out_dir + "/" + name), size) << name;
  }

  std::string scaling = o.out_dir + "/scaling.csv";
  EXPECT_EQ(csv_value(scaling, "run", "w4", "speedup"), "2.5");
  EXPECT_EQ(csv_value(scaling, "run", "w4", "efficiency"), "0.625");
  EXPECT_EQ(csv_value(scaling, "run", "w4", "ps_bound_MB_per_step"), "8");
  EXPECT_EQ(csv_value(scaling, "run", "w4", "ring_MB_per_worker_step"), "1.5");
  EXPECT_EQ(csv_value(scaling, "run", "w2", "comm_ms_per_step"), "20");
  EXPECT_EQ(csv_value(scaling, "run", "w2", "backward_ms_per_step"), "40");  // 2 x 2 s / 100 steps
  EXPECT_EQ(csv_value(o.out_dir + "/convergence_epochs.csv", "run", "w4", "forward_s"), "0.5");
  EXPECT_EQ(csv_value(scaling, "run", "w1", "bandwidth_MBps"), "20");
  EXPECT_EQ(csv_value(o.out_dir + "/batch.csv", "run", "w2", "global_batch"), "64");
  EXPECT_EQ(csv_value(o.out_dir + "/convergence_epochs.csv", "run", "w1", "epoch_s"), "10");

  std::string md = read_file(r.report_md);
  EXPECT_NE(md.find("| W=4 | 4 | 2 | 4 | 2.5 | 0.625 |"), std::string::npos) << md;
  EXPECT_NE(md.find("![scaling](scaling.png)"), std::string::npos);
  // The step-time distribution of every worker: W=4's worker 3, 15 ms slower than worker 0 at every step.
  EXPECT_NE(md.find("| W=4 | 3 | 10 | 28 | 31 | 31 |"), std::string::npos) << md;
  EXPECT_NE(md.find("![step time of every worker](step_times.png)"), std::string::npos);
  EXPECT_NE(md.find("2(W-1)/W x M"), std::string::npos);
  EXPECT_EQ(md.find("Plots were skipped"), std::string::npos);
}

TEST(ReportOutput, WithoutMatplotlibTheTablesAreStillWritten) {
  TempDir tmp;
  std::vector<std::string> dirs = testing::write_scaling_fixture(tmp.path());
  ReportOptions o;
  o.out_dir = tmp.path() + "/report";
  o.python = tmp.path() + "/no-such-python3";
  ReportResult r = write_report(dirs, o);
  EXPECT_FALSE(r.plots_drawn);
  EXPECT_TRUE(r.pngs.empty());
  EXPECT_NE(r.plots_note.find("no python3 with matplotlib"), std::string::npos) << r.plots_note;
  EXPECT_EQ(csv_value(o.out_dir + "/scaling.csv", "run", "w2", "speedup"), "2");
  EXPECT_NE(read_file(r.report_md).find("**Plots were skipped:**"), std::string::npos);
}

TEST(ReportOutput, FolderOfRunsExpandsToItsRunsAndDefaultOutputIsBesideOneRun) {
  TempDir tmp;
  std::vector<std::string> dirs = testing::write_scaling_fixture(tmp.path() + "/sweep");
  EXPECT_EQ(expand_run_dirs({tmp.path() + "/sweep"}), dirs);
  EXPECT_EQ(expand_run_dirs({dirs[1]}), std::vector<std::string>{dirs[1]});
  EXPECT_THROW(expand_run_dirs({tmp.path() + "/missing"}), Error);
  EXPECT_EQ(default_report_dir({dirs[0] + "/"}), dirs[0] + "/report");
  EXPECT_EQ(default_report_dir(dirs).rfind("reports/", 0), 0u);
}

void expect_error_mentions(const std::string& dir, const std::vector<std::string>& parts) {
  try {
    read_run(dir);
    ADD_FAILURE() << "no error for " << dir;
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(ReportInput, MalformedMetricsNameTheFileAndLine) {
  TempDir tmp;
  std::string good = "{\"event\":\"step\",\"epoch\":1,\"step\":0,\"loss\":2.5,\"lr\":0.1,\"wall_s\":0.1}\n";
  testing::write_text(tmp.path() + "/a/metrics.jsonl",
                      good + good + "{\"event\":\"epoch\",\"epoch\":1,\"step\":\"x\"}\n");
  expect_error_mentions(tmp.path() + "/a", {tmp.path() + "/a/metrics.jsonl:3", "'step'", "number"});

  testing::write_text(tmp.path() + "/b/metrics.jsonl", good + "{\"event\":\"step\",\"loss\":\n");
  expect_error_mentions(tmp.path() + "/b", {tmp.path() + "/b/metrics.jsonl:2"});

  testing::write_text(tmp.path() + "/c/metrics.jsonl", "[1,2]\n");
  expect_error_mentions(tmp.path() + "/c", {"metrics.jsonl:1", "JSON object"});

  testing::write_text(tmp.path() + "/d/metrics.jsonl", good +
                                                           "{\"event\":\"step\",\"epoch\":1.5,\"step\":0,\"loss\":1,"
                                                           "\"wall_s\":0}\n");
  expect_error_mentions(tmp.path() + "/d", {"metrics.jsonl:2", "'epoch'", "integer"});

  expect_error_mentions(tmp.path() + "/none", {"none/metrics.jsonl", "cannot open"});

  ReportOptions o;
  o.out_dir = tmp.path() + "/out";
  EXPECT_THROW(write_report({tmp.path() + "/a"}, o), Error);
}

// An aborted job writes a summary of the epochs it finished, marked `aborted`: the report lists the
// run as aborted, not as finished.
TEST(ReportInput, AnAbortedRunIsListedAsAbortedNotFinished) {
  TempDir tmp;
  testing::write_text(tmp.path() + "/r/metrics.jsonl",
                      "{\"event\":\"epoch\",\"epoch\":1,\"step\":10,\"test_acc\":0.5}\n"
                      "{\"event\":\"summary\",\"test_acc\":0.5,\"epochs\":1,\"aborted\":\"worker 1 is dead\"}\n");
  RunMetrics run = read_run(tmp.path() + "/r");
  EXPECT_FALSE(run.summary.has_value());
  EXPECT_EQ(run.aborted, "worker 1 is dead");
  ReportOptions o;
  o.out_dir = tmp.path() + "/report";
  o.python = tmp.path() + "/no-such-python3";
  ReportResult r = write_report({tmp.path() + "/r"}, o);
  EXPECT_EQ(csv_value(o.out_dir + "/runs.csv", "run", "r", "finished"), "aborted");
  EXPECT_NE(read_file(r.report_md).find("| r (aborted) |"), std::string::npos) << read_file(r.report_md);
}

TEST(ReportInput, UnfinishedRunsAndNullFieldsAreRead) {
  TempDir tmp;
  testing::write_text(tmp.path() + "/r/metrics.jsonl",
                      "{\"event\":\"epoch\",\"epoch\":1,\"step\":10,\"train_loss\":0.5,\"train_acc\":null,"
                      "\"test_loss\":null,\"test_acc\":null,\"epoch_s\":2,\"future_field\":[1,2]}\n"
                      "{\"event\":\"something_new\"}\n");
  RunMetrics run = read_run(tmp.path() + "/r");
  EXPECT_EQ(run.name, "r");
  EXPECT_FALSE(run.summary.has_value());
  ASSERT_EQ(run.epochs.size(), 1u);
  EXPECT_EQ(run.epochs[0].step, 10);
  EXPECT_DOUBLE_EQ(*run.epochs[0].train_loss, 0.5);
  EXPECT_FALSE(run.epochs[0].train_acc.has_value());
  EXPECT_TRUE(run.config.empty());
}

}  // namespace
}  // namespace pshard::report
