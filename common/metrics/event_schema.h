// The lines of metrics.jsonl, declared once (event_schema.cc; checked and rendered by event_check.cc): every event with
// its fields, their JSON types, whether they may be absent or null, and what they mean. The writers' lines are checked
// against it (MetricsWriter::write), so are the events a worker or server sends the coordinator and the lines the
// reader reads back (read_run); docs/METRICS.md's field tables are its rendering (`pshard report --events`, kept equal
// by a test).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/util/json.h"

namespace pshard::metrics_events {

enum class FieldType {
  kInteger,  // a number with no fraction
  kNumber,   // a number, or "nan" / "inf" / "-inf" (JSON has no non-finite numbers)
  kString,
  kBool,
  kList,
  kObject,
};

struct Field {
  std::string name;
  FieldType type = FieldType::kNumber;
  bool optional = false;  // may be absent from the line
  bool nullable = false;  // may be null (not applicable, not measured)
};

// One row of an event's table: fields that share a meaning.
struct FieldRow {
  std::vector<Field> fields;
  std::string meaning;  // Markdown, as docs/METRICS.md shows it
};

struct EventSpec {
  std::string name;  // the line's `event` field
  std::string when;  // who writes it and when (the table's heading)
  std::vector<FieldRow> rows;
  const Field* field(std::string_view name) const;  // nullptr: not declared
};

// Every event of metrics.jsonl, in the order docs/METRICS.md describes them.
const std::vector<EventSpec>& events();
// nullptr: no such event.
const EventSpec* find_event(std::string_view name);

enum class Check {
  kComplete,  // a line as written: every field declared, of its type, and every field that is not optional present
  kReadBack,  // a line read back from a run directory, maybe of another version: the declared fields it has are of
              // their type (a number may be null: older writers wrote non-finite numbers so), others are ignored
};
// Throws pshard::Error "WHERE: event 'NAME': ..." naming the first field that is undeclared, of the wrong type or
// missing, or the event when it is not declared.
void check_event(const Json& event, const std::string& where, Check check = Check::kComplete);

// Markdown: one event's heading (### `event: "NAME"` (WHEN)) and its field table; all of them, each followed by a
// blank line.
std::string heading_markdown(const EventSpec& event);
std::string table_markdown(const EventSpec& event);
std::string events_markdown();

namespace detail {
// The declaration as written in event_schema.cc; events() parses it once (event_check.cc).
struct RawRow {
  const char* fields;  // "NAME:TYPE ...", see event_schema.cc
  const char* meaning;
};
struct RawEvent {
  const char* name;
  const char* when;
  std::vector<RawRow> rows;
};
const std::vector<RawEvent>& raw_events();
}  // namespace detail

}  // namespace pshard::metrics_events
