// JSON writer and strict parser.
#include "common/util/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <sstream>

#include "common/error.h"

namespace pshard {

Json Json::object() {
  Json j;
  j.type_ = Type::kObject;
  return j;
}

Json Json::array() {
  Json j;
  j.type_ = Type::kArray;
  return j;
}

Json& Json::set(const std::string& key, Json value) {
  if (type_ != Type::kObject) throw Error("json: set('" + key + "') on a non-object");
  for (auto& kv : object_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return *this;
    }
  }
  object_.emplace_back(key, std::move(value));
  return *this;
}

bool Json::has(const std::string& key) const {
  if (type_ != Type::kObject) return false;
  for (const auto& kv : object_) {
    if (kv.first == key) return true;
  }
  return false;
}

const Json& Json::at(const std::string& key) const {
  if (type_ == Type::kObject) {
    for (const auto& kv : object_) {
      if (kv.first == key) return kv.second;
    }
  }
  throw Error("json: missing field '" + key + "'");
}

Json& Json::push(Json value) {
  if (type_ != Type::kArray) throw Error("json: push on a non-array");
  array_.push_back(std::move(value));
  return *this;
}

size_t Json::size() const { return type_ == Type::kArray ? array_.size() : object_.size(); }

namespace {
// The text dump() writes for a non-finite number, and its value; nullopt for any other string.
std::optional<double> non_finite_value(const std::string& s) {
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}
}  // namespace

bool Json::is_numeric() const {
  return type_ == Type::kNumber || (type_ == Type::kString && non_finite_value(string_));
}

double Json::as_number() const {
  if (type_ == Type::kString) {
    if (std::optional<double> v = non_finite_value(string_)) return *v;
  }
  if (type_ != Type::kNumber) throw Error("json: expected a number");
  return number_;
}

int64_t Json::as_int() const {
  double v = as_number();
  if (v != std::floor(v)) throw Error("json: expected an integer");
  // [-2^63, 2^63): outside it the cast is undefined behaviour.
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) throw Error("json: integer out of range");
  return static_cast<int64_t>(v);
}

bool Json::as_bool() const {
  if (type_ != Type::kBool) throw Error("json: expected true or false");
  return bool_;
}

const std::string& Json::as_string() const {
  if (type_ != Type::kString) throw Error("json: expected a string");
  return string_;
}

namespace {

void dump_string(const std::string& s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

void dump_value(const Json& j, bool spaced, std::string* out) {
  switch (j.type()) {
    case Json::Type::kNull: *out += "null"; break;
    case Json::Type::kBool: *out += j.as_bool() ? "true" : "false"; break;
    case Json::Type::kNumber: {
      double v = j.as_number();
      if (std::isnan(v)) {
        *out += "\"nan\"";
      } else if (std::isinf(v)) {
        *out += v > 0 ? "\"inf\"" : "\"-inf\"";
      } else if (v == std::floor(v) && std::fabs(v) < 9e15) {
        *out += std::to_string(static_cast<int64_t>(v));
      } else {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.9g", v);
        *out += buf;
      }
      break;
    }
    case Json::Type::kString: dump_string(j.as_string(), out); break;
    case Json::Type::kArray: {
      out->push_back('[');
      bool first = true;
      for (const Json& e : j.elements()) {
        if (!first) *out += spaced ? ", " : ",";
        first = false;
        dump_value(e, spaced, out);
      }
      out->push_back(']');
      break;
    }
    case Json::Type::kObject: {
      out->push_back('{');
      bool first = true;
      for (const auto& kv : j.items()) {
        if (!first) *out += spaced ? ", " : ",";
        first = false;
        dump_string(kv.first, out);
        *out += spaced ? ": " : ":";
        dump_value(kv.second, spaced, out);
      }
      out->push_back('}');
      break;
    }
  }
}

class Parser {
 public:
  Parser(const std::string& text, const std::string& origin) : s_(text), origin_(origin) {}

  Json parse_document() {
    Json v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    throw Error(origin_ + ": invalid JSON at byte " + std::to_string(pos_) + ": " + why);
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool consume(const char* word) {
    size_t n = std::char_traits<char>::length(word);
    if (s_.compare(pos_, n, word) == 0) {
      pos_ += n;
      return true;
    }
    return false;
  }
  Json parse_value(int depth) {
    if (depth > 64) fail("nesting deeper than 64");
    skip_ws();
    if (pos_ >= s_.size()) fail("unexpected end");
    char c = s_[pos_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return Json(parse_string());
    if (consume("null")) return Json();
    if (consume("true")) return Json(true);
    if (consume("false")) return Json(false);
    return parse_number();
  }
  Json parse_number() {
    const char* begin = s_.c_str() + pos_;
    char* end = nullptr;
    double v = std::strtod(begin, &end);
    if (end == begin) fail("expected a value");
    pos_ += static_cast<size_t>(end - begin);
    return Json(v);
  }
  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      char c = s_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'u': {
          if (pos_ + 4 > s_.size()) fail("short \\u escape");
          unsigned code = static_cast<unsigned>(std::strtoul(s_.substr(pos_, 4).c_str(), nullptr, 16));
          pos_ += 4;
          if (code < 0x80) {
            out.push_back(static_cast<char>(code));
          } else if (code < 0x800) {
            out.push_back(static_cast<char>(0xC0 | (code >> 6)));
            out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
          } else {
            out.push_back(static_cast<char>(0xE0 | (code >> 12)));
            out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
          }
          break;
        }
        default: fail("bad escape");
      }
    }
  }
  Json parse_array(int depth) {
    ++pos_;
    Json arr = Json::array();
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return arr;
    }
    while (true) {
      arr.push(parse_value(depth + 1));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return arr;
      }
      fail("expected ',' or ']'");
    }
  }
  Json parse_object(int depth) {
    ++pos_;
    Json obj = Json::object();
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return obj;
    }
    while (true) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a field name");
      std::string key = parse_string();
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') fail("expected ':'");
      ++pos_;
      obj.set(key, parse_value(depth + 1));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return obj;
      }
      fail("expected ',' or '}'");
    }
  }

  const std::string& s_;
  std::string origin_;
  size_t pos_ = 0;
};

}  // namespace

std::string Json::dump() const {
  std::string out;
  dump_value(*this, /*spaced=*/false, &out);
  return out;
}

std::string Json::dump_spaced() const {
  std::string out;
  dump_value(*this, /*spaced=*/true, &out);
  return out;
}

Json Json::parse(const std::string& text, const std::string& origin) { return Parser(text, origin).parse_document(); }

}  // namespace pshard
