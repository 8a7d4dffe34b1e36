// A metrics.jsonl line that its declaration accepts whole: every field that is not optional, with a value of its
// type, to which a test sets the fields it is about.
#pragma once

#include <string>

#include "common/error.h"
#include "common/metrics/event_schema.h"
#include "common/util/json.h"

namespace pshard::testing {

inline Json minimal_event(const std::string& name) {
  const metrics_events::EventSpec* spec = metrics_events::find_event(name);
  if (!spec) throw Error("minimal_event: no event '" + name + "'");
  Json e = Json::object().set("event", name);
  for (const metrics_events::FieldRow& row : spec->rows) {
    for (const metrics_events::Field& f : row.fields) {
      if (f.optional) continue;
      switch (f.type) {
        case metrics_events::FieldType::kInteger: e.set(f.name, 1); break;
        case metrics_events::FieldType::kNumber: e.set(f.name, 0.5); break;
        case metrics_events::FieldType::kString: e.set(f.name, "x"); break;
        case metrics_events::FieldType::kBool: e.set(f.name, false); break;
        case metrics_events::FieldType::kList: e.set(f.name, Json::array()); break;
        case metrics_events::FieldType::kObject: e.set(f.name, Json::object()); break;
      }
    }
  }
  return e;
}

}  // namespace pshard::testing
