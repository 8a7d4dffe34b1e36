// The metrics events' declaration: it parses, the lines pshard's writers build pass it whole, and a line that is
// not declared, misses a field or has one of another type is refused naming the field.
#include "common/metrics/event_schema.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "common/error.h"
#include "common/metrics/epoch_report.h"
#include "common/metrics/start_event.h"
#include "tests/support/metrics_events.h"

namespace pshard {
namespace {

using metrics_events::Check;
using metrics_events::check_event;

std::string refusal(const Json& event, Check check = Check::kComplete) {
  try {
    check_event(event, "metrics.jsonl:7", check);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

WorkerEpochReport report(uint32_t rank) {
  WorkerEpochReport r;
  r.rank = rank;
  r.host = rank;
  r.epoch = 2;
  r.step = 20;
  r.steps = 10;
  r.samples = 320;
  r.loss_sum = 4.5;
  r.correct = 200;
  r.evaluated = true;
  r.test_n = 100;
  r.test_loss_sum = 30;
  r.test_correct = 80;
  r.bytes_sent = 1000;
  r.bytes_recv = 2000;
  r.lr = 0.1;
  return r;
}

TEST(MetricsEvents, EveryEventIsDeclaredOnceWithFields) {
  std::set<std::string> names;
  for (const metrics_events::EventSpec& e : metrics_events::events()) {
    EXPECT_TRUE(names.insert(e.name).second) << e.name;
    EXPECT_FALSE(e.rows.empty()) << e.name;
    EXPECT_FALSE(e.when.empty()) << e.name;
    for (const metrics_events::FieldRow& r : e.rows) {
      EXPECT_FALSE(r.fields.empty()) << e.name;
      EXPECT_FALSE(r.meaning.empty()) << e.name;
    }
  }
  EXPECT_EQ(names,
            (std::set<std::string>{"start", "step", "epoch", "rejoin", "members", "failure", "stall", "summary"}));
  const metrics_events::Field* loss = metrics_events::find_event("step")->field("loss");
  ASSERT_NE(loss, nullptr);
  EXPECT_EQ(loss->type, metrics_events::FieldType::kNumber);
  EXPECT_TRUE(loss->nullable);
  EXPECT_FALSE(loss->optional);
  EXPECT_TRUE(metrics_events::find_event("epoch")->field("figures")->optional);
  EXPECT_EQ(metrics_events::find_event("nope"), nullptr);
}

TEST(MetricsEvents, TheLinesPshardBuildsPassWhole) {
  StartEvent start;
  start.model = "mlp";
  start.optimizer = "sgd";
  start.mode = "sync";
  start.start_step = 40;
  start.program = true;
  EXPECT_EQ(refusal(start.to_json()), "");

  WorkerEpochReport a = report(0), b = report(1);
  b.has_gpu = true;
  b.gpu_util_pct = 80;
  b.gpu_mem_peak_bytes = 1 << 30;
  a.has_loss_scale = b.has_loss_scale = true;
  a.loss_scale = b.loss_scale = 1024;
  a.figures["test_auc"] = 0.7;
  a.figures["test_logloss"] = std::nan("");
  const Json epoch = combine_epoch({a, b});
  EXPECT_EQ(refusal(epoch), "");
  EXPECT_EQ(refusal(combine_epoch({report(0)})), "");

  RunTotals totals;
  totals.add_epoch(epoch);
  // What the coordinator (or `pshard train`) adds to the totals: who ran, the model file.
  EXPECT_EQ(refusal(totals.summary(12.5).set("workers", 2).set("servers", 1).set("model_file", Json())), "");
  EXPECT_EQ(refusal(totals.summary(12.5)), "metrics.jsonl:7: event 'summary': field 'workers' is missing");
}

TEST(MetricsEvents, ALineOffItsDeclarationIsRefusedNamingTheField) {
  EXPECT_EQ(refusal(testing::minimal_event("failure")), "");
  EXPECT_EQ(refusal(testing::minimal_event("step").set("tokens", 5)),
            "metrics.jsonl:7: event 'step': field 'tokens' is not declared (common/metrics/event_schema.cc)");
  EXPECT_EQ(refusal(testing::minimal_event("step").set("epoch", 1.5)),
            "metrics.jsonl:7: event 'step': field 'epoch' must be an integer (a number with no fraction), got 1.5");
  EXPECT_EQ(refusal(testing::minimal_event("members").set("workers", 3)),
            "metrics.jsonl:7: event 'members': field 'workers' must be a list, got 3");
  EXPECT_EQ(refusal(testing::minimal_event("epoch").set("epoch_s", Json())),
            "metrics.jsonl:7: event 'epoch': field 'epoch_s' must be a number (or \"nan\", \"inf\", \"-inf\"), got "
            "null");
  EXPECT_EQ(refusal(Json::object().set("event", "rejoin").set("rank", 1)),
            "metrics.jsonl:7: event 'rejoin': field 'step' is missing");
  EXPECT_EQ(refusal(Json::object().set("event", "progress")),
            "metrics.jsonl:7: unknown event 'progress' (docs/METRICS.md lists the events)");
  EXPECT_EQ(refusal(Json::array()), "metrics.jsonl:7: a metrics event must be a JSON object");
  // Non-finite numbers are written as strings, and nullable fields may be null.
  EXPECT_EQ(refusal(testing::minimal_event("step").set("loss", "nan")), "");
  EXPECT_EQ(refusal(testing::minimal_event("epoch").set("test_acc", Json())), "");
  EXPECT_NE(refusal(testing::minimal_event("step").set("lr", "fast")), "");
}

TEST(MetricsEvents, ALineReadBackIsCheckedOnlyForTheDeclaredFieldsItHas) {
  // Another version's line: fields it lacks or adds, and nulls for the numbers older writers could not write.
  const Json old = Json::object().set("event", "step").set("epoch", 1).set("step", 0).set("loss", Json());
  EXPECT_EQ(refusal(old, Check::kReadBack), "");
  EXPECT_EQ(refusal(Json(old).set("tokens", 5).set("wall_s", Json()), Check::kReadBack), "");
  EXPECT_EQ(refusal(Json(old).set("step", "x"), Check::kReadBack),
            "metrics.jsonl:7: event 'step': field 'step' must be an integer (a number with no fraction), got \"x\"");
  EXPECT_NE(refusal(old), "");  // as a line to write it is incomplete
}

TEST(MetricsEvents, TheTablesAreTheDeclarationInMarkdown) {
  const metrics_events::EventSpec& start = *metrics_events::find_event("start");
  EXPECT_EQ(metrics_events::heading_markdown(start),
            "### `event: \"start\"` (distributed runs: the first line, sent by worker 0)\n");
  const std::string table = metrics_events::table_markdown(start);
  EXPECT_EQ(table.substr(0, table.find('\n', table.find('\n', table.find('\n') + 1) + 1) + 1),
            "| field | meaning |\n| --- | --- |\n| `model`, `optimizer`, `lr`, `mode` | what is trained |\n");
  const std::string all = metrics_events::events_markdown();
  EXPECT_LT(all.find("### `event: \"start\"`"), all.find("### `event: \"summary\"`"));
}

}  // namespace
}  // namespace pshard
