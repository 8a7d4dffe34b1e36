// The metrics events' declaration (event_schema.cc) parsed once, a line checked against it, and rendered as
// docs/METRICS.md's tables.
#include <cmath>
#include <sstream>

#include "common/error.h"
#include "common/metrics/event_schema.h"

namespace pshard::metrics_events {
namespace {

Field parse_field(const std::string& spec, const char* event) {
  const size_t colon = spec.find(':');
  // A malformed declaration is a bug in event_schema.cc; event_schema_test parses every one.
  if (colon == std::string::npos || colon + 1 >= spec.size()) {
    throw Error("metrics event '" + std::string(event) + "': field spec '" + spec + "' is not NAME:TYPE");
  }
  Field f;
  f.name = spec.substr(0, colon);
  switch (spec[colon + 1]) {
    case 'i': f.type = FieldType::kInteger; break;
    case 'n': f.type = FieldType::kNumber; break;
    case 's': f.type = FieldType::kString; break;
    case 'b': f.type = FieldType::kBool; break;
    case 'l': f.type = FieldType::kList; break;
    case 'o': f.type = FieldType::kObject; break;
    default: throw Error("metrics event '" + std::string(event) + "': field spec '" + spec + "' has an unknown type");
  }
  for (size_t i = colon + 2; i < spec.size(); ++i) {
    if (spec[i] == '*') {
      f.nullable = true;
    } else if (spec[i] == '?') {
      f.optional = true;
    } else {
      throw Error("metrics event '" + std::string(event) + "': field spec '" + spec + "' has an unknown mark");
    }
  }
  return f;
}

std::vector<EventSpec> parse_events() {
  std::vector<EventSpec> out;
  for (const detail::RawEvent& raw : detail::raw_events()) {
    EventSpec e;
    e.name = raw.name;
    e.when = raw.when;
    for (const detail::RawRow& r : raw.rows) {
      FieldRow row;
      row.meaning = r.meaning;
      std::istringstream specs(r.fields);
      std::string spec;
      while (specs >> spec) {
        Field f = parse_field(spec, raw.name);
        bool in_row = false;
        for (const Field& g : row.fields) in_row = in_row || g.name == f.name;
        if (in_row || e.field(f.name)) throw Error("metrics event '" + e.name + "' declares '" + f.name + "' twice");
        row.fields.push_back(std::move(f));
      }
      e.rows.push_back(std::move(row));
    }
    out.push_back(std::move(e));
  }
  return out;
}

const char* type_name(FieldType t) {
  switch (t) {
    case FieldType::kInteger: return "an integer (a number with no fraction)";
    case FieldType::kNumber: return "a number (or \"nan\", \"inf\", \"-inf\")";
    case FieldType::kString: return "a string";
    case FieldType::kBool: return "true or false";
    case FieldType::kList: return "a list";
    case FieldType::kObject: return "an object";
  }
  return "?";
}

bool has_type(const Json& v, FieldType t) {
  switch (t) {
    case FieldType::kInteger: return v.is_number() && std::floor(v.as_number()) == v.as_number();
    case FieldType::kNumber: return v.is_numeric();
    case FieldType::kString: return v.is_string();
    case FieldType::kBool: return v.type() == Json::Type::kBool;
    case FieldType::kList: return v.is_array();
    case FieldType::kObject: return v.is_object();
  }
  return false;
}

}  // namespace

const Field* EventSpec::field(std::string_view name) const {
  for (const FieldRow& r : rows) {
    for (const Field& f : r.fields) {
      if (f.name == name) return &f;
    }
  }
  return nullptr;
}

const std::vector<EventSpec>& events() {
  static const std::vector<EventSpec> kParsed = parse_events();
  return kParsed;
}

const EventSpec* find_event(std::string_view name) {
  for (const EventSpec& e : events()) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

void check_event(const Json& event, const std::string& where, Check check) {
  if (!event.is_object()) throw Error(where + ": a metrics event must be a JSON object");
  if (!event.has("event") || !event.at("event").is_string()) throw Error(where + ": missing string field 'event'");
  const std::string& name = event.at("event").as_string();
  const EventSpec* spec = find_event(name);
  if (!spec) throw Error(where + ": unknown event '" + name + "' (docs/METRICS.md lists the events)");
  const std::string prefix = where + ": event '" + name + "': ";
  const bool read_back = check == Check::kReadBack;
  for (const auto& [key, value] : event.items()) {
    if (key == "event") continue;
    const Field* f = spec->field(key);
    if (!f && read_back) continue;
    if (!f) throw Error(prefix + "field '" + key + "' is not declared (common/metrics/event_schema.cc)");
    const bool null_ok =
        f->nullable || (read_back && (f->type == FieldType::kNumber || f->type == FieldType::kInteger));
    if (value.is_null() ? !null_ok : !has_type(value, f->type)) {
      throw Error(prefix + "field '" + key + "' must be " + type_name(f->type) + (f->nullable ? " or null" : "") +
                  ", got " + value.dump());
    }
  }
  if (read_back) return;
  for (const FieldRow& r : spec->rows) {
    for (const Field& f : r.fields) {
      if (!f.optional && !event.has(f.name)) throw Error(prefix + "field '" + f.name + "' is missing");
    }
  }
}

std::string heading_markdown(const EventSpec& event) {
  return "### `event: \"" + event.name + "\"` (" + event.when + ")\n";
}

std::string table_markdown(const EventSpec& event) {
  std::string out = "| field | meaning |\n| --- | --- |\n";
  for (const FieldRow& r : event.rows) {
    std::string names;
    for (const Field& f : r.fields) names += (names.empty() ? "`" : ", `") + f.name + "`";
    out += "| " + names + " | " + r.meaning + " |\n";
  }
  return out;
}

std::string events_markdown() {
  std::string out;
  for (const EventSpec& e : events()) out += heading_markdown(e) + "\n" + table_markdown(e) + "\n";
  return out;
}

}  // namespace pshard::metrics_events
