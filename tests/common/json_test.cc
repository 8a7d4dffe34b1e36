// JSON writer/parser: exact output, round trips and errors with offsets.
#include "common/util/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/error.h"

namespace {

using pshard::Json;

TEST(Json, DumpsInInsertionOrder) {
  Json j = Json::object();
  j.set("event", "epoch").set("epoch", 3).set("acc", 0.5).set("none", nullptr).set("ok", true);
  Json arr = Json::array();
  arr.push(1).push("a\"b\n");
  j.set("list", arr);
  EXPECT_EQ(j.dump(), R"({"event":"epoch","epoch":3,"acc":0.5,"none":null,"ok":true,"list":[1,"a\"b\n"]})");
}

TEST(Json, DumpsSpacedWithASpaceAfterEachColonAndComma) {
  Json j = Json::object();
  j.set("n", 2).set("list", Json::array().push(1).push("a, b: c")).set("empty", Json::array());
  EXPECT_EQ(j.dump_spaced(), R"({"n": 2, "list": [1, "a, b: c"], "empty": []})");
  EXPECT_EQ(Json::parse(j.dump_spaced(), "x").dump(), j.dump());
}

// JSON has no NaN: a non-finite number is written as a string that reads back as that number, so that a diverged
// loss is recorded as such (null means "not measured").
TEST(Json, NonFiniteNumbersAreStringsThatReadBack) {
  Json j = Json::object();
  j.set("x", std::numeric_limits<double>::quiet_NaN());
  j.set("p", std::numeric_limits<double>::infinity()).set("m", -std::numeric_limits<double>::infinity());
  EXPECT_EQ(j.dump(), R"({"x":"nan","p":"inf","m":"-inf"})");
  Json back = Json::parse(j.dump(), "x");
  EXPECT_TRUE(std::isnan(back.at("x").as_number()));
  EXPECT_EQ(back.at("p").as_number(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(back.at("m").as_number(), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(back.at("x").is_numeric());
  EXPECT_FALSE(back.at("x").is_number());
  EXPECT_FALSE(Json("nano").is_numeric());
  EXPECT_THROW(Json("nano").as_number(), pshard::Error);
  EXPECT_THROW(back.at("x").as_int(), pshard::Error);
}

TEST(Json, ParsesBack) {
  Json j = Json::parse(R"( {"a": [1, 2.5, {"b": "c\u00e9"}], "n": null, "t": false} )", "x");
  EXPECT_EQ(j.at("a").elements().size(), 3u);
  EXPECT_DOUBLE_EQ(j.at("a").elements()[1].as_number(), 2.5);
  EXPECT_EQ(j.at("a").elements()[2].at("b").as_string(), "c\xc3\xa9");
  EXPECT_TRUE(j.at("n").is_null());
  EXPECT_FALSE(j.at("t").as_bool());
  EXPECT_EQ(Json::parse(j.dump(), "again").dump(), j.dump());
}

TEST(Json, PreservesDoublePrecisionForMetrics) {
  Json j = Json::object();
  j.set("v", 0.123456789);
  EXPECT_NEAR(Json::parse(j.dump(), "x").at("v").as_number(), 0.123456789, 1e-9);
}

TEST(Json, ErrorsNameOriginAndOffset) {
  try {
    Json::parse(R"({"a": 1,, })", "metrics.jsonl:7");
    FAIL() << "no error";
  } catch (const pshard::Error& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl:7: invalid JSON at byte 8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Json::parse("[1, 2", "x"), pshard::Error);
  EXPECT_THROW(Json::parse("{\"a\": 1} trailing", "x"), pshard::Error);
  EXPECT_THROW(Json::parse("\"unterminated", "x"), pshard::Error);
  EXPECT_THROW(Json::object().at("missing"), pshard::Error);
}

}  // namespace
