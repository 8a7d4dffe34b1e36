// `pshard train`: single-process training, the local reference for distributed runs
// (worker/trainer/local_training.h).
#include "app/command.h"
#include "common/util/args.h"
#include "worker/trainer/local_training.h"

namespace pshard::app {
namespace {

int run_train(const std::vector<std::string>& args) {
  ArgParser p("pshard train", "train a model in one process (no servers): the local reference run");
  p.add_option("config", "FILE", "experiment config (TOML), e.g. configs/fmnist_mlp.toml", true);
  p.add_multi("set", "KEY=VALUE", "override a config key, e.g. --set optimizer.lr=0.05");
  p.add_option("run-dir", "DIR",
               "where metrics.jsonl, metrics.csv, config.toml and model.bin go (default: the first of runs/<run.name>, "
               "runs/<run.name>.1, ... that holds no run); a DIR that holds a run is refused (see --start-over)");
  p.add_flag("start-over",
             "--run-dir holds a run: move it to DIR.old-N (nothing is deleted) and start a new run in DIR");
  if (!p.parse(args)) return 0;

  trainer::LocalTrainingOptions o;
  o.config_path = p.get("config");
  o.overrides = p.get_all("set");
  o.run_dir = p.get("run-dir");
  o.start_over = p.flag("start-over");
  return trainer::run_local_training(o);
}

}  // namespace

PSHARD_COMMAND(train, "train a model in one process (the local reference)", run_train);

}  // namespace pshard::app
