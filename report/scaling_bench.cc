// The command-line front of `pshard bench scaling`, built on the sweep runner and the report.
#include "report/scaling_bench.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "common/error.h"
#include "common/util/args.h"
#include "models/zoo/profile.h"
#include "report/sweep.h"

namespace pshard::report {

std::vector<std::string> profile_overrides(const std::string& profile_path, std::string* description) {
  char* resolved = ::realpath(profile_path.c_str(), nullptr);
  if (!resolved) throw Error("model profile " + profile_path + ": cannot open: " + std::strerror(errno));
  const std::string path = resolved;
  std::free(resolved);
  const models::ModelProfile profile = models::read_model_profile(path);  // refused here, not in every run
  if (description) {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "profile %s (%s): %lld parameters in %zu layers, forward %.1f + backward %.1f ms per step at batch "
                  "%lld (scaled to train.batch_size)",
                  profile.name.c_str(), path.c_str(), static_cast<long long>(profile.num_params()),
                  profile.layers.size(), profile.forward_ms(), profile.backward_ms(),
                  static_cast<long long>(profile.batch));
    *description = buf;
  }
  return {"model.name=profile",
          "model.profile=" + path,
          "data.name=synthetic-images",
          "data.image_shape=[1, 1, 1]",
          "data.classes=" + std::to_string(profile.classes),
          "train.eval=false"};
}

int run_scaling_bench(const std::vector<std::string>& args) {
  ArgParser p("pshard bench scaling",
              "run the same job through pshard launch at each worker count and print speedup, efficiency, compute "
              "vs communication and bandwidth (a report goes to OUT/report)");
  p.add_option("workers", "LIST", "worker counts, e.g. 1,2,4,8", true);
  p.add_option("servers", "S", "parameter servers of every run", false, "1");
  p.add_option("simulate-compute", "MS",
               "replace forward/backward by a fixed sleep of MS per step (sets train.simulate_compute_ms)");
  p.add_option("profile", "FILE",
               "train a profile model (profiles/*.json): a real architecture's tensors, with each layer's compute "
               "replaced by a wait of its time (sets model.name = profile, model.profile and tiny synthetic data)");
  p.add_option("config", "FILE", "experiment config (TOML)", true);
  p.add_multi("set", "KEY=VALUE", "override a config key in every run");
  p.add_option("out", "DIR", "folder of the runs (default runs/scaling-<timestamp>)");
  p.add_option("run-timeout", "SEC", "stop a run that takes longer", false, "86400");
  p.add_flag("resume", "skip worker counts whose run already finished");
  p.allow_command(
      "run this program as every worker (pshard launch ... -- CMD), e.g. python3 train.py with pshard.torch: the "
      "tables use the phases it reports");
  if (!p.parse(args)) return 0;

  std::vector<int64_t> workers = parse_int_list(p.get("workers"), "--workers");
  GridAxis axis{"workers", {}};
  for (int64_t w : workers) axis.values.push_back(std::to_string(w));
  std::string spec = "workers=";
  for (size_t i = 0; i < axis.values.size(); ++i) spec += (i ? "," : "") + axis.values[i];
  std::vector<SweepPoint> points = expand_grid({parse_grid_axis(spec)});

  SweepOptions o;
  o.config = p.get("config");
  o.sets = p.get_all("set");
  o.servers = p.get_int("servers");
  o.command = p.command();
  if (o.servers < 1) throw Error("pshard bench scaling: --servers must be >= 1");
  if (!o.command.empty() && (p.has("profile") || p.has("simulate-compute"))) {
    throw Error(
        "pshard bench scaling: --profile and --simulate-compute replace pshard's own workers' compute; a "
        "program after -- computes itself");
  }
  std::string profile_description;
  if (p.has("profile")) {
    if (p.has("simulate-compute")) {
      throw Error(
          "pshard bench scaling: --profile and --simulate-compute exclude each other (a profile model "
          "already waits each layer's time)");
    }
    const std::vector<std::string> sets = profile_overrides(p.get("profile"), &profile_description);
    o.sets.insert(o.sets.begin(), sets.begin(), sets.end());  // before the --set values, which may override them
  }
  if (p.has("simulate-compute")) {
    double ms = p.get_double("simulate-compute");
    if (!(ms >= 0)) throw Error("pshard bench scaling: --simulate-compute must be >= 0 ms");
    o.sets.push_back("train.simulate_compute_ms=" + p.get("simulate-compute"));
  }
  if (p.has("out")) {
    o.out_dir = p.get("out");
  } else {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "runs/scaling-%Y%m%d-%H%M%S", &tm);
    o.out_dir = buf;
  }
  o.run_timeout_s = p.get_double("run-timeout");
  o.resume = p.flag("resume");

  std::printf("bench scaling: %zu runs (workers %s, %lld server%s) into %s\n", points.size(), p.get("workers").c_str(),
              static_cast<long long>(o.servers), o.servers == 1 ? "" : "s", o.out_dir.c_str());
  if (!profile_description.empty()) std::printf("%s\n", profile_description.c_str());
  std::fflush(stdout);
  SweepResult r = run_sweep(points, o, [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  });
  if (r.report && !r.report->scaling.empty()) {
    for (const ScalingGroup& g : r.report->scaling) {
      std::printf("\n%s", scaling_markdown(g, r.report->labels).c_str());
    }
    std::printf("\ndefinitions of the columns: %s\n", r.report_md.c_str());
  } else {
    std::printf("no scaling table (fewer than two worker counts finished)\n");
  }
  if (!r.report_note.empty()) std::printf("report: %s\n", r.report_note.c_str());
  std::printf("summary: %s\n", r.summary_md.c_str());
  if (r.failed > 0) {
    std::fprintf(stderr, "pshard bench scaling: %d of %zu runs failed (see %s)\n", r.failed, r.runs.size(),
                 r.summary_md.c_str());
    return 1;
  }
  return 0;
}

}  // namespace pshard::report
