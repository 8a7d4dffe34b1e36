// Minimal JSON: a value type, a writer (one line, for metrics.jsonl and
// --json output) and a strict parser (for reading runs back in reports).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace pshard {

// A JSON value. Objects keep insertion order so output is stable.
//
//   Json j = Json::object();
//   j.set("event", "epoch").set("epoch", 3).set("test_acc", 0.91);
//   std::string line = j.dump();          // {"event":"epoch","epoch":3,"test_acc":0.91}
//   Json back = Json::parse(line, "metrics.jsonl:4");
//   double acc = back.at("test_acc").as_number();
class Json {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool b) : type_(Type::kBool), bool_(b) {}
  Json(int v) : type_(Type::kNumber), number_(v) {}
  Json(int64_t v) : type_(Type::kNumber), number_(static_cast<double>(v)) {}
  Json(uint64_t v) : type_(Type::kNumber), number_(static_cast<double>(v)) {}
  Json(uint32_t v) : type_(Type::kNumber), number_(v) {}
  Json(double v) : type_(Type::kNumber), number_(v) {}
  Json(float v) : type_(Type::kNumber), number_(v) {}
  Json(const char* s) : type_(Type::kString), string_(s) {}
  Json(std::string s) : type_(Type::kString), string_(std::move(s)) {}

  static Json object();
  static Json array();

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_number() const { return type_ == Type::kNumber; }
  // A number, or one of the strings "nan", "inf", "-inf" that stand for a non-finite number.
  bool is_numeric() const;
  bool is_string() const { return type_ == Type::kString; }
  bool is_object() const { return type_ == Type::kObject; }
  bool is_array() const { return type_ == Type::kArray; }

  // Object access. set() replaces an existing key; at() throws pshard::Error
  // naming the key when it is missing; has() tests.
  Json& set(const std::string& key, Json value);
  bool has(const std::string& key) const;
  const Json& at(const std::string& key) const;
  const std::vector<std::pair<std::string, Json>>& items() const { return object_; }

  // Array access.
  Json& push(Json value);
  const std::vector<Json>& elements() const { return array_; }
  size_t size() const;

  // Typed reads; a wrong type throws pshard::Error. as_number() also reads the strings "nan", "inf" and
  // "-inf", which dump() writes for non-finite numbers (JSON has none).
  double as_number() const;
  int64_t as_int() const;
  bool as_bool() const;
  const std::string& as_string() const;

  // One line, no spaces. Non-finite numbers are written as the strings "nan", "inf" and "-inf" (JSON has no
  // NaN; null stays "not measured"), which as_number() reads back.
  std::string dump() const;
  // One line with a space after each ':' and ',' ({"a": 1, "b": [2, 3]}), for files that people
  // read and scripts grep (cluster.json).
  std::string dump_spaced() const;
  // Strict parse; errors name `origin` and the byte offset.
  static Json parse(const std::string& text, const std::string& origin);

 private:
  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<Json> array_;
  std::vector<std::pair<std::string, Json>> object_;
};

}  // namespace pshard
