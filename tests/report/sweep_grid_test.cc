// Grid parsing, combination order and run names of `pshard sweep`, and the runner with a stand-in pshard.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "common/error.h"
#include "report/sweep.h"
#include "tests/support/report_fixtures.h"

namespace pshard::report {
namespace {

using testing::TempDir;

TEST(SweepGrid, ParsesValuesAndKeepsBracketedListsWhole) {
  GridAxis a = parse_grid_axis("optimizer.lr=0.001, 0.01,0.1");
  EXPECT_EQ(a.key, "optimizer.lr");
  EXPECT_EQ(a.values, (std::vector<std::string>{"0.001", "0.01", "0.1"}));
  GridAxis h = parse_grid_axis("model.hidden=[256,128],[512]");
  EXPECT_EQ(h.values, (std::vector<std::string>{"[256,128]", "[512]"}));
  EXPECT_EQ(parse_grid_axis("workers=1,2,4").values.size(), 3u);
}

TEST(SweepGrid, RejectsMalformedSpecs) {
  for (const char* bad : {"optimizer.lr", "=1,2", "optimizer.lr=", "optimizer.lr=0.1,,0.2", "model.hidden=[1,2",
                          "model.hidden=1]", "optimizer.lr=0.1,0.1", "workers=0,2", "workers=two"}) {
    EXPECT_THROW(parse_grid_axis(bad), Error) << bad;
  }
  try {
    parse_grid_axis("workers=1,x");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'x'"), std::string::npos) << e.what();
  }
}

TEST(SweepGrid, CartesianProductFirstAxisSlowestWithReadableNames) {
  std::vector<SweepPoint> p =
      expand_grid({parse_grid_axis("optimizer.name=sgd,adam"), parse_grid_axis("optimizer.lr=0.1,0.01,0.001")});
  ASSERT_EQ(p.size(), 6u);
  EXPECT_EQ(p[0].name, "1_name=sgd_lr=0.1");
  EXPECT_EQ(p[1].name, "2_name=sgd_lr=0.01");
  EXPECT_EQ(p[3].name, "4_name=adam_lr=0.1");
  EXPECT_EQ(p[5].name, "6_name=adam_lr=0.001");
  EXPECT_EQ(p[4].values,
            (std::vector<std::pair<std::string, std::string>>{{"optimizer.name", "adam"}, {"optimizer.lr", "0.01"}}));
  EXPECT_EQ(p[0].workers, 0);
}

TEST(SweepGrid, AmbiguousShortKeysStayFullAndIndexIsPadded) {
  std::vector<SweepPoint> p =
      expand_grid({parse_grid_axis("model.name=mlp,lenet"), parse_grid_axis("optimizer.name=sgd,adam,lamb,lars,adamw"),
                   parse_grid_axis("model.hidden=[256, 128],[64]")});
  ASSERT_EQ(p.size(), 20u);
  EXPECT_EQ(p[0].name, "01_model.name=mlp_optimizer.name=sgd_hidden=256-128");
  EXPECT_EQ(p[19].name, "20_model.name=lenet_optimizer.name=adamw_hidden=64");
}

TEST(SweepGrid, ProcessCountAxesSelectPshardLaunch) {
  std::vector<SweepPoint> p = expand_grid({parse_grid_axis("workers=1,4"), parse_grid_axis("train.batch_size=32")});
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1].workers, 4);
  EXPECT_EQ(p[1].name, "2_workers=4_batch_size=32");
  SweepOptions o;
  o.config = "c.toml";
  o.sets = {"train.epochs=1"};
  EXPECT_EQ(run_command(o, p[1], "pshard", "out/x"),
            (std::vector<std::string>{"pshard", "launch", "--servers", "1", "--workers", "4", "--config", "c.toml",
                                      "--set", "train.epochs=1", "--set", "train.batch_size=32", "--set",
                                      "run.name=2_workers=4_batch_size=32", "--run-dir", "out/x"}));
  SweepPoint local = expand_grid({parse_grid_axis("optimizer.lr=0.5")})[0];
  EXPECT_EQ(run_command(o, local, "pshard", "d"),
            (std::vector<std::string>{"pshard", "train", "--config", "c.toml", "--set", "train.epochs=1", "--set",
                                      "optimizer.lr=0.5", "--set", "run.name=1_lr=0.5", "--run-dir", "d"}));
  o.servers = 2;
  EXPECT_THROW(run_command(o, local, "pshard", "d"), Error);  // servers without workers
  o.workers = 3;
  EXPECT_EQ(run_command(o, local, "pshard", "d")[3], "2");
}

TEST(SweepGrid, AProgramAfterDashDashRunsAsLaunchWorkers) {
  SweepOptions o;
  o.config = "c.toml";
  o.command = {"python3", "train.py", "--fast"};
  SweepPoint lr = expand_grid({parse_grid_axis("optimizer.lr=0.5")})[0];
  // No workers given: one worker of pshard launch runs the program.
  const std::vector<std::string> cmd = run_command(o, lr, "pshard", "d");
  EXPECT_EQ(cmd, (std::vector<std::string>{"pshard", "launch", "--servers", "1", "--workers", "1", "--config", "c.toml",
                                           "--set", "optimizer.lr=0.5", "--set", "run.name=1_lr=0.5", "--run-dir", "d",
                                           "--", "python3", "train.py", "--fast"}));
  const Json settings = sweep_point_json(o, lr, cmd);
  EXPECT_EQ(settings.at("run").as_string(), "1_lr=0.5");
  EXPECT_EQ(settings.at("values").at("optimizer.lr").as_string(), "0.5");
  EXPECT_EQ(settings.at("workers").as_int(), 1);
  EXPECT_EQ(settings.at("servers").as_int(), 1);
  EXPECT_EQ(settings.at("command").size(), cmd.size());
  SweepPoint w = expand_grid({parse_grid_axis("workers=4"), parse_grid_axis("servers=2")})[0];
  EXPECT_EQ(sweep_point_json(o, w, {}).at("workers").as_int(), 4);
  EXPECT_EQ(sweep_point_json(o, w, {}).at("servers").as_int(), 2);
  EXPECT_EQ(run_command(o, w, "pshard", "d")[5], "4");
}

TEST(SweepGrid, TooManyOrRepeatedAxesAreErrors) {
  EXPECT_THROW(expand_grid({}), Error);
  EXPECT_THROW(expand_grid({parse_grid_axis("optimizer.lr=1,2"), parse_grid_axis("optimizer.lr=3")}), Error);
}

// A stand-in for the pshard executable: writes config.toml and a metrics.jsonl
// whose test accuracy is the learning rate; lr=0.5 fails with exit code 3.
const char* kFakePshard = R"(#!/bin/sh
dir=""; lr=""
while [ $# -gt 0 ]; do
  case "$1" in
    --run-dir) dir="$2"; shift ;;
    --set) case "$2" in optimizer.lr=*) lr="${2#optimizer.lr=}" ;; esac; shift ;;
  esac
  shift
done
echo "fake pshard: lr=$lr dir=$dir"
if [ "$lr" = "0.5" ]; then echo "diverged" >&2; exit 3; fi
mkdir -p "$dir"
printf '[optimizer]\nlr = %s\n' "$lr" > "$dir/config.toml"
printf '{"event":"epoch","epoch":1,"step":10,"train_loss":1,"test_acc":%s,"epoch_s":1}\n' "$lr" > "$dir/metrics.jsonl"
printf '{"event":"summary","test_acc":%s,"train_loss":1,"epochs":1,"steps":10,"workers":1}\n' "$lr" >> "$dir/metrics.jsonl"
)";

TEST(SweepRunner, OneRunPerCombinationThenSummaryAndFailuresCounted) {
  TempDir tmp;
  std::string fake = tmp.path() + "/fake-pshard";
  testing::write_text(fake, kFakePshard);
  chmod(fake.c_str(), 0755);
  testing::write_text(tmp.path() + "/c.toml", "[optimizer]\nname = \"sgd\"\n");

  SweepOptions o;
  o.config = tmp.path() + "/c.toml";
  o.out_dir = tmp.path() + "/sweep";
  o.pshard = fake;
  o.report = false;
  o.run_timeout_s = 60;
  std::vector<std::string> lines;
  SweepResult r = run_sweep(expand_grid({parse_grid_axis("optimizer.lr=0.1,0.5,0.3")}), o,
                            [&](const std::string& l) { lines.push_back(l); });
  ASSERT_EQ(r.runs.size(), 3u);
  EXPECT_EQ(r.failed, 1);
  EXPECT_TRUE(r.runs[0].error.empty()) << r.runs[0].error;
  EXPECT_EQ(r.runs[1].exit_code, 3);
  EXPECT_NE(r.runs[1].error.find("exit code 3"), std::string::npos);
  ASSERT_TRUE(r.runs[2].metrics.has_value());
  EXPECT_DOUBLE_EQ(*r.runs[2].metrics->summary->test_acc, 0.3);
  EXPECT_EQ(r.runs[2].dir, o.out_dir + "/3_lr=0.3");
  EXPECT_TRUE(is_run_dir(o.out_dir + "/1_lr=0.1"));
  EXPECT_FALSE(is_run_dir(o.out_dir + "/2_lr=0.5"));

  std::ifstream log(o.out_dir + "/logs/2_lr=0.5.log");
  std::stringstream log_text;
  log_text << log.rdbuf();
  EXPECT_NE(log_text.str().find("diverged"), std::string::npos);

  std::ifstream md(r.summary_md);
  std::stringstream md_text;
  md_text << md.rdbuf();
  EXPECT_NE(md_text.str().find("Best: **3_lr=0.3**"), std::string::npos) << md_text.str();
  std::ifstream csv(r.summary_csv);
  std::string header, row1;
  std::getline(csv, header);
  std::getline(csv, row1);
  EXPECT_EQ(header.rfind("index,run,optimizer.lr,status,", 0), 0u) << header;
  EXPECT_EQ(row1.rfind("1,1_lr=0.1,0.1,done,1,1,,,0.1,", 0), 0u) << row1;

  // --resume runs only what did not finish.
  o.resume = true;
  SweepResult again = run_sweep(expand_grid({parse_grid_axis("optimizer.lr=0.1,0.5,0.3")}), o, [](auto&) {});
  EXPECT_TRUE(again.runs[0].skipped);
  EXPECT_FALSE(again.runs[1].skipped);
  EXPECT_TRUE(again.runs[2].skipped);
}

TEST(SweepRunner, BadGridValueIsAnErrorBeforeAnythingRuns) {
  TempDir tmp;
  testing::write_text(tmp.path() + "/c.toml", "[optimizer]\nname = \"sgd\"\n");
  SweepOptions o;
  o.config = tmp.path() + "/c.toml";
  o.out_dir = tmp.path() + "/sweep";
  o.pshard = "/bin/false";
  try {
    run_sweep(expand_grid({parse_grid_axis("cluster.mode=sync,bogus")}), o, [](auto&) {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cluster.mode"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(is_run_dir(o.out_dir + "/1_mode=sync"));
}

}  // namespace
}  // namespace pshard::report
