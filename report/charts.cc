// The charts of `pshard report`: what each PNG shows, as panels over the CSV tables (report/plots.h draws them).
#include "report/charts.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "report/tables.h"

namespace pshard::report {
namespace {

// Losses spanning more than two decades read better on a log axis (all must be > 0).
bool losses_want_log_axis(const std::vector<RunMetrics>& runs) {
  double lo = HUGE_VAL, hi = 0;
  auto add = [&](const std::optional<double>& v) {
    if (!v || !std::isfinite(*v)) return;
    lo = std::min(lo, *v);
    hi = std::max(hi, *v);
  };
  for (const RunMetrics& r : runs) {
    for (const StepRecord& s : r.steps) add(s.loss);
    for (const EpochRecord& e : r.epochs) {
      add(e.train_loss);
      add(e.test_loss);
    }
  }
  return lo > 0 && hi > 100 * lo;
}

// A line panel over worker counts: base-2 axis with a tick at each count.
PlotPanel over_workers(PlotPanel p) {
  p.logx = true;
  p.data_xticks = true;
  return p;
}

}  // namespace

PlotLayer layer(const std::string& csv, const std::string& x, const std::string& y, const std::string& group,
                const std::string& label, const std::string& style, const std::string& marker) {
  PlotLayer l;
  l.csv = csv;
  l.x = x;
  l.y = y;
  l.group = group;
  l.label = label;
  l.style = style;
  l.marker = marker;
  return l;
}

PlotPanel panel(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                std::vector<PlotLayer> layers, const std::string& kind) {
  PlotPanel p;
  p.title = title;
  p.xlabel = xlabel;
  p.ylabel = ylabel;
  p.kind = kind;
  p.layers = std::move(layers);
  return p;
}

std::vector<PlotChart> convergence_charts(const std::vector<RunMetrics>& runs, const ReportOptions& o) {
  const bool logy = losses_want_log_axis(runs);
  bool have_steps = false;
  for (const RunMetrics& r : runs) have_steps = have_steps || !r.steps.empty();
  const std::string sc = "convergence_steps.csv", ec = "convergence_epochs.csv";
  std::vector<PlotChart> charts;
  auto chart = [&](const std::string& png, const std::string& title, PlotPanel p) {
    if (p.ylabel.find("loss") != std::string::npos) p.logy = logy;
    PlotChart c;
    c.png = png;
    c.title = title;
    c.width = o.plot_width;
    c.height = o.plot_height;
    c.panels.push_back(std::move(p));
    charts.push_back(std::move(c));
  };
  bool have_train_loss = any_value(runs, &EpochRecord::train_loss);
  bool have_test_loss = any_value(runs, &EpochRecord::test_loss);
  if (have_steps) {
    chart("loss_vs_step.png", "Training loss vs step",
          panel("loss of one batch (every log_every steps)", "step", "training loss",
                {layer(sc, "step", "loss", "label", "")}));
    chart("loss_vs_time.png", "Training loss vs wall time",
          panel("loss of one batch against seconds since the start of training", "wall time (s)", "training loss",
                {layer(sc, "wall_s", "loss", "label", "")}));
  } else if (have_train_loss) {
    chart("loss_vs_step.png", "Training loss vs step",
          panel("mean loss of each epoch, at the step the epoch ended", "step", "training loss",
                {layer(ec, "step", "train_loss", "label", "", "-", "o")}));
    chart("loss_vs_time.png", "Training loss vs wall time",
          panel("mean loss of each epoch, at the time the epoch ended", "wall time (s)", "training loss",
                {layer(ec, "wall_s", "train_loss", "label", "", "-", "o")}));
  }
  std::vector<PlotLayer> loss_layers;
  if (have_train_loss) loss_layers.push_back(layer(ec, "epoch", "train_loss", "label", "(train)", "-", "o"));
  if (have_test_loss) loss_layers.push_back(layer(ec, "epoch", "test_loss", "label", "(test)", "--", "s"));
  if (!loss_layers.empty()) {
    PlotPanel p =
        panel("train: mean over the epoch (solid); test: after the epoch (dashed)", "epoch", "loss", loss_layers);
    p.integer_x = true;
    chart("loss_vs_epoch.png", "Loss vs epoch", p);
  }
  std::vector<PlotLayer> acc_layers;
  if (any_value(runs, &EpochRecord::train_acc)) {
    acc_layers.push_back(layer(ec, "epoch", "train_acc", "label", "(train)", "-", "o"));
  }
  if (any_value(runs, &EpochRecord::test_acc)) {
    acc_layers.push_back(layer(ec, "epoch", "test_acc", "label", "(test)", "--", "s"));
  }
  if (!acc_layers.empty()) {
    PlotPanel p = panel("train: mean over the epoch (solid); test: after the epoch (dashed)", "epoch",
                        "accuracy (fraction)", acc_layers);
    p.integer_x = true;
    chart("accuracy_vs_epoch.png", "Accuracy vs epoch", p);
  }
  return charts;
}

std::vector<PlotChart> scaling_charts(const std::vector<ScalingGroup>& groups, const ReportOptions& o) {
  std::vector<PlotChart> charts;
  const std::string csv = "scaling.csv";
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const ScalingGroup& g = groups[gi];
    std::string suffix = groups.size() > 1 ? "_" + std::to_string(gi + 1) : "";
    std::map<std::string, std::string> where = {{"group", g.title}};
    auto with_where = [&](PlotLayer l) {
      l.where = where;
      return l;
    };
    PlotChart c;
    c.png = "scaling" + suffix + ".png";
    c.title = "Scaling with the number of workers" + (g.title == "all runs" ? "" : " (" + g.title + ")");
    c.width = o.plot_width;
    c.height = o.plot_height * 3 / 2;
    c.panels.push_back(over_workers(panel("mean epoch time", "workers W", "epoch time (s)",
                                          {with_where(layer(csv, "workers", "epoch_s", "", "measured", "-", "o"))})));
    c.panels.push_back(
        over_workers(panel("speedup T(W0)/T(W)", "workers W", "speedup (x)",
                           {with_where(layer(csv, "workers", "speedup", "", "measured", "-", "o")),
                            with_where(layer(csv, "workers", "ideal_speedup", "", "ideal (linear)", "--", ""))})));
    c.panels.push_back(
        over_workers(panel("scaling efficiency speedup x W0/W", "workers W", "efficiency (fraction)",
                           {with_where(layer(csv, "workers", "efficiency", "", "measured", "-", "o"))})));
    c.panels.push_back(panel("time per step (mean over workers)", "workers W", "time per step (ms)",
                             {with_where(layer(csv, "workers", "data_ms_per_step", "", "waiting for data")),
                              with_where(layer(csv, "workers", "forward_ms_per_step", "", "forward")),
                              with_where(layer(csv, "workers", "backward_ms_per_step", "", "backward")),
                              with_where(layer(csv, "workers", "comm_ms_per_step", "", "blocked on communication")),
                              with_where(layer(csv, "workers", "other_ms_per_step", "", "other"))},
                             "stacked"));
    charts.push_back(c);

    PlotChart b;
    b.png = "bandwidth" + suffix + ".png";
    b.title = "Communication volume and bandwidth" + (g.title == "all runs" ? "" : " (" + g.title + ")");
    b.width = o.plot_width;
    b.height = o.plot_height * 3 / 2;
    b.panels.push_back(
        panel("traffic per step, all workers (sent + received)", "workers W", "MB per step",
              {with_where(layer(csv, "workers", "traffic_MB_per_step", "", "measured")),
               with_where(layer(csv, "workers", "fp32_traffic_MB_per_step", "", "the same payloads as float32")),
               with_where(layer(csv, "workers", "ps_bound_MB_per_step", "", "parameter server 2 x model x W"))},
              "bars"));
    b.panels.push_back(
        panel("bytes sent per worker per step", "workers W", "MB per worker per step",
              {with_where(layer(csv, "workers", "sent_MB_per_worker_step", "", "measured")),
               with_where(layer(csv, "workers", "ps_sent_MB_per_worker_step", "", "parameter server (model)")),
               with_where(layer(csv, "workers", "ring_MB_per_worker_step", "", "ring all-reduce 2(W-1)/W x model"))},
              "bars"));
    b.panels.push_back(over_workers(
        panel("achieved bandwidth (sent + received)", "workers W", "MB/s",
              {with_where(layer(csv, "workers", "bandwidth_MBps", "", "all workers", "-", "o")),
               with_where(layer(csv, "workers", "bandwidth_per_worker_MBps", "", "per worker", "--", "s"))})));
    b.panels.push_back(
        over_workers(panel("share of a step blocked on communication", "workers W", "comm / step time (fraction)",
                           {with_where(layer(csv, "workers", "comm_fraction", "", "measured", "-", "o"))})));
    charts.push_back(b);
  }
  return charts;
}

PlotChart step_time_chart(const ReportOptions& o) {
  PlotChart c;
  c.png = "step_times.png";
  c.title = "Step time of every worker";
  c.width = o.plot_width;
  c.height = o.plot_height;
  c.panels = {panel("wall time of each logged step (every train.log_every steps): stragglers stand out", "step",
                    "step time (ms)", {layer("step_times.csv", "step", "step_ms", "series", "", "-", "o")})};
  return c;
}

PlotChart batch_chart(const ReportOptions& o) {
  PlotChart c;
  c.png = "throughput_vs_batch.png";
  c.title = "Throughput vs batch size";
  c.width = o.plot_width;
  c.height = o.plot_height;
  PlotPanel t = panel("training throughput, all workers", "global batch (samples per step)", "samples/s",
                      {layer("batch.csv", "global_batch", "samples_per_s", "workers_label", "", "-", "o")});
  t.logx = true;
  t.data_xticks = true;
  PlotPanel s = panel("time per step", "global batch (samples per step)", "time per step (ms)",
                      {layer("batch.csv", "global_batch", "step_ms", "workers_label", "", "-", "o")});
  s.logx = true;
  s.data_xticks = true;
  c.panels = {t, s};
  return c;
}

}  // namespace pshard::report
