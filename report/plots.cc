// Writes the chart manifest and calls tools/plot_report.py.
#include "report/plots.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "common/error.h"
#include "common/util/child_process.h"
#include "common/util/json.h"

namespace pshard::report {
namespace {

bool readable(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

std::string find_script(const std::string& preferred) {
  if (!preferred.empty()) return preferred;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("PSHARD_PLOT_SCRIPT")) candidates.push_back(env);
  // build/bin/pshard -> tools/ of the source tree next to the build folder.
  std::string exe = self_executable();
  std::string bin = exe.substr(0, exe.find_last_of('/'));
  candidates.push_back(bin + "/../../tools/plot_report.py");
  candidates.push_back(bin + "/../share/pshard/plot_report.py");
  if (const char* src = std::getenv("PSHARD_SOURCE_DIR"))
    candidates.push_back(std::string(src) + "/tools/plot_report.py");
  candidates.push_back("tools/plot_report.py");
  for (const std::string& c : candidates) {
    if (readable(c)) return c;
  }
  return "";
}

Json layer_json(const PlotLayer& l) {
  Json where = Json::object();
  for (const auto& [k, v] : l.where) where.set(k, v);
  return Json::object()
      .set("csv", l.csv)
      .set("x", l.x)
      .set("y", l.y)
      .set("group", l.group)
      .set("label", l.label)
      .set("style", l.style)
      .set("marker", l.marker)
      .set("where", where);
}

Json chart_json(const PlotChart& c) {
  Json panels = Json::array();
  for (const PlotPanel& p : c.panels) {
    Json layers = Json::array();
    for (const PlotLayer& l : p.layers) layers.push(layer_json(l));
    panels.push(Json::object()
                    .set("title", p.title)
                    .set("xlabel", p.xlabel)
                    .set("ylabel", p.ylabel)
                    .set("kind", p.kind)
                    .set("logx", p.logx)
                    .set("logy", p.logy)
                    .set("integer_x", p.integer_x)
                    .set("data_xticks", p.data_xticks)
                    .set("layers", layers));
  }
  return Json::object()
      .set("png", c.png)
      .set("title", c.title)
      .set("width", c.width)
      .set("height", c.height)
      .set("panels", panels);
}

}  // namespace

std::string find_python(const std::string& preferred, std::string* why) {
  std::vector<std::string> candidates;
  if (!preferred.empty()) {
    candidates.push_back(preferred);
  } else {
    if (const char* env = std::getenv("PSHARD_PYTHON")) candidates.push_back(env);
    candidates.push_back("python3");
    candidates.push_back("/usr/bin/python3");
  }
  std::string tried;
  for (const std::string& py : candidates) {
    tried += (tried.empty() ? "" : ", ") + py;
    try {
      ChildResult r = run_child({py, "-c", "import matplotlib"}, "/dev/null", 120);
      if (r.exit_code == 0 && !r.timed_out) return py;
    } catch (const Error&) {
      // not installed: try the next one
    }
  }
  *why = "no python3 with matplotlib found (tried " + tried +
         "); install python3-matplotlib (scripts/install-deps.sh) or set PSHARD_PYTHON";
  return "";
}

PlotOutcome draw_charts(const std::vector<PlotChart>& charts, const std::string& out_dir, const std::string& python,
                        const std::string& script, double timeout_s) {
  PlotOutcome out;
  if (charts.empty()) {
    out.note = "no charts to draw";
    return out;
  }
  std::string py = find_python(python, &out.note);
  if (py.empty()) return out;
  std::string script_path = find_script(script);
  if (script_path.empty() || !readable(script_path)) {
    out.note = "plot script tools/plot_report.py not found (set PSHARD_PLOT_SCRIPT)";
    return out;
  }
  Json manifest_charts = Json::array();
  for (const PlotChart& c : charts) manifest_charts.push(chart_json(c));
  std::string manifest = out_dir + "/plots.json";
  {
    std::ofstream f(manifest, std::ios::binary | std::ios::trunc);
    if (!f) throw Error(manifest + ": cannot write");
    f << Json::object().set("charts", manifest_charts).dump() << "\n";
    if (!f) throw Error(manifest + ": write failed");
  }
  std::string log = out_dir + "/plots.log";
  std::remove(log.c_str());
  ChildResult r = run_child({py, script_path, manifest}, log, timeout_s);
  if (r.timed_out || r.exit_code != 0) {
    out.note = std::string("plotting failed (") + (r.timed_out ? "timed out" : "exit " + std::to_string(r.exit_code)) +
               "); see " + log;
    return out;
  }
  for (const PlotChart& c : charts) {
    std::string png = out_dir + "/" + c.png;
    if (!readable(png)) {
      out.note = png + " was not written; see " + log;
      return out;
    }
    out.pngs.push_back(png);
  }
  out.drawn = true;
  return out;
}

}  // namespace pshard::report
