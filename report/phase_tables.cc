// Step-time distribution per worker and server phases, from the metrics of runs.
#include "report/phase_tables.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>

namespace pshard::report {
namespace {

std::string ms(double seconds) {
  if (!std::isfinite(seconds)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", seconds * 1e3);
  return buf;
}

std::string percent(double part, double whole) {
  if (!(whole > 0)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * part / whole);
  return buf;
}

std::string cell(std::string s) {
  std::replace(s.begin(), s.end(), '|', '/');
  return s;
}

}  // namespace

double percentile(std::vector<double>& values, double p) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(values.size()));
  const size_t i = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(values.size()))) - 1;
  return values[i];
}

std::vector<StepTimeRow> step_time_rows(const std::vector<RunMetrics>& runs) {
  std::vector<StepTimeRow> rows;
  for (size_t i = 0; i < runs.size(); ++i) {
    std::map<uint32_t, std::vector<const StepRecord*>> by_rank;
    for (const StepRecord& s : runs[i].steps) {
      if (s.step_s) by_rank[s.rank].push_back(&s);
    }
    for (const auto& [rank, steps] : by_rank) {
      StepTimeRow row;
      row.run = i;
      row.rank = rank;
      row.samples = steps.size();
      std::vector<double> times;
      size_t with_phases = 0;
      for (const StepRecord* s : steps) {
        times.push_back(*s->step_s);
        row.mean_s += *s->step_s;
        if (s->phases) {
          row.mean_phases += *s->phases;
          ++with_phases;
        }
      }
      row.mean_s /= static_cast<double>(times.size());
      if (with_phases > 0) row.mean_phases /= static_cast<double>(with_phases);
      row.p50_s = percentile(times, 50);
      row.p99_s = percentile(times, 99);
      row.max_s = times.back();
      rows.push_back(row);
    }
  }
  return rows;
}

std::string step_times_markdown(const std::vector<StepTimeRow>& rows, const std::vector<RunMetrics>& runs,
                                const std::vector<std::string>& labels) {
  std::ostringstream out;
  out << "| run | worker | steps logged | p50 (ms) | p99 (ms) | max (ms) | mean (ms) | data | fwd | bwd | comm | other "
         "|\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const StepTimeRow& r : rows) {
    out << "| " << cell(labels.at(r.run).empty() ? runs.at(r.run).name : labels.at(r.run)) << " | " << r.rank << " | "
        << r.samples << " | " << ms(r.p50_s) << " | " << ms(r.p99_s) << " | " << ms(r.max_s) << " | " << ms(r.mean_s);
    for (double v : r.mean_phases.s) out << " | " << ms(v);
    out << " |\n";
  }
  return out.str();
}

std::string server_phases_markdown(const std::vector<RunMetrics>& runs, const std::vector<std::string>& labels) {
  std::ostringstream out;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].summary) continue;
    for (const ServerPhasesRecord& s : runs[i].summary->servers_phases) {
      const double capacity = static_cast<double>(s.threads) * s.wall_s;
      char wall[32];
      std::snprintf(wall, sizeof wall, "%.4g", s.wall_s);
      out << "| " << cell(labels.at(i)) << " | " << s.rank << " | " << s.threads << " | " << wall;
      for (double v : s.phases.s) out << " | " << percent(v, capacity);
      out << " |\n";
    }
  }
  if (out.str().empty()) return "";
  return "| run | server | threads | wall (s) | recv | aggregate | update | reply | idle | other |\n"
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n" +
         out.str();
}

}  // namespace pshard::report
