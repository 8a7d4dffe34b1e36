// MetricsWriter: JSON lines as written, epoch rows in the CSV.
#include "common/metrics/metrics_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "common/error.h"

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(MetricsWriter, WritesJsonLinesAndEpochCsv) {
  std::string dir = "/tmp/pshard_metrics_test_" + std::to_string(::getpid()) + "/nested/run";
  {
    pshard::MetricsWriter m(dir);
    pshard::Json workers = pshard::Json::array();
    workers.push(pshard::Json::object().set("rank", 0));
    m.write(pshard::Json::object().set("event", "step").set("step", 0).set("loss", 2.5));
    m.write(pshard::Json::object().set("event", "epoch").set("epoch", 1).set("test_acc", 0.75).set("workers", workers));
    m.write(pshard::Json::object().set("event", "epoch").set("epoch", 2).set("test_acc", nullptr));
    m.write(pshard::Json::object().set("event", "summary").set("test_acc", 0.75));
    m.write_file("config.toml", "[run]\nname = \"x\"\n");
  }
  EXPECT_EQ(read_all(dir + "/metrics.jsonl"),
            "{\"event\":\"step\",\"step\":0,\"loss\":2.5}\n"
            "{\"event\":\"epoch\",\"epoch\":1,\"test_acc\":0.75,\"workers\":[{\"rank\":0}]}\n"
            "{\"event\":\"epoch\",\"epoch\":2,\"test_acc\":null}\n"
            "{\"event\":\"summary\",\"test_acc\":0.75}\n");
  EXPECT_EQ(read_all(dir + "/metrics.csv"), "event,epoch,test_acc\nepoch,1,0.75\nepoch,2,\n");
  EXPECT_EQ(read_all(dir + "/config.toml"), "[run]\nname = \"x\"\n");
  std::string cleanup = "rm -rf /tmp/pshard_metrics_test_" + std::to_string(::getpid());
  EXPECT_EQ(std::system(cleanup.c_str()), 0);
}

TEST(MetricsWriter, UnwritableDirectoryIsAnError) {
  EXPECT_THROW(pshard::MetricsWriter("/proc/pshard_cannot_exist/run"), pshard::Error);
}

}  // namespace
