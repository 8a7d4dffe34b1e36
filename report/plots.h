// Charts of a report: described in C++, drawn by tools/plot_report.py (python3 + matplotlib).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace pshard::report {

// One set of points: columns `x` and `y` of a CSV in the report folder, split
// into one line per value of column `group` (if set), rows filtered by `where`.
struct PlotLayer {
  std::string csv, x, y, group, label;
  std::string style = "-";  // matplotlib line style: "-", "--", ":"
  std::string marker;       // "o", "s", ... or "" for none
  std::map<std::string, std::string> where;
};

struct PlotPanel {
  std::string title, xlabel, ylabel;
  std::string kind = "line";        // line | bars | stacked | timeline (tools/plot_report.py)
  bool logx = false, logy = false;  // logx: base 2
  bool integer_x = false;           // whole-number x ticks (epochs)
  bool data_xticks = false;         // x ticks exactly at the data (worker counts)
  std::vector<PlotLayer> layers;
};

struct PlotChart {
  std::string png;  // file name in the report folder
  std::string title;
  int width = 1000, height = 600;  // pixels
  std::vector<PlotPanel> panels;
};

struct PlotOutcome {
  bool drawn = false;
  std::string note;  // why plots were skipped or failed; empty when drawn
  std::vector<std::string> pngs;
};

// Writes OUT/plots.json and runs `python plot_report.py OUT/plots.json`
// (output in OUT/plots.log, at most `timeout_s`). `python` empty: the first
// of $PSHARD_PYTHON, python3 on PATH, /usr/bin/python3 that imports
// matplotlib; `script` empty: $PSHARD_PLOT_SCRIPT, then tools/plot_report.py
// of the source tree (BIN/../../tools, $PSHARD_SOURCE_DIR/tools, ./tools). No python with matplotlib is not an error:
// the outcome says the plots were skipped.
//
//   PlotOutcome o = draw_charts(charts, "reports/x", "", "");
//   if (!o.drawn) std::printf("plots skipped: %s\n", o.note.c_str());
PlotOutcome draw_charts(const std::vector<PlotChart>& charts, const std::string& out_dir, const std::string& python,
                        const std::string& script, double timeout_s = 300);

// A python interpreter that can import matplotlib, or "" (with *why set).
std::string find_python(const std::string& preferred, std::string* why);

}  // namespace pshard::report
