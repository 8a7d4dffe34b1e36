// The charts of `pshard report` (convergence, scaling, step times, throughput against batch size) as panels over its
// CSV tables; report/plots.h draws them. Each needs only the runs' figures and the report's options.
#pragma once

#include <string>
#include <vector>

#include "common/metrics/metrics_reader.h"
#include "report/plots.h"
#include "report/report.h"
#include "report/tables.h"

namespace pshard::report {

// The pieces of a chart: a line (or bar, or span) layer of CSV columns, and a panel of layers with its axes' labels.
PlotLayer layer(const std::string& csv, const std::string& x, const std::string& y, const std::string& group,
                const std::string& label, const std::string& style = "-", const std::string& marker = "");
PlotPanel panel(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                std::vector<PlotLayer> layers, const std::string& kind = "line");

// Loss and accuracy against epochs and time, one line per run (convergence_*.csv).
std::vector<PlotChart> convergence_charts(const std::vector<RunMetrics>& runs, const ReportOptions& o);
// Speedup, efficiency, throughput and the step's phases against workers, one chart per scaling group.
std::vector<PlotChart> scaling_charts(const std::vector<ScalingGroup>& groups, const ReportOptions& o);
// Every worker's logged step times (step_times.csv): stragglers stand out.
PlotChart step_time_chart(const ReportOptions& o);
// Throughput and time per step against the global batch (batch.csv).
PlotChart batch_chart(const ReportOptions& o);

}  // namespace pshard::report
