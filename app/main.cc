// pshard: one executable, many roles (coordinator, server, worker, launch...).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "app/command.h"
#include "common/config/schema.h"
#include "common/error.h"
#include "models/zoo/registry.h"
#include "optim/optimizer.h"

namespace pshard::app {
namespace {

std::vector<Command>& table() {
  static std::vector<Command> t;
  return t;
}

void print_usage(std::FILE* out) {
  std::fprintf(out, "usage: pshard <command> [options]   (pshard <command> --help for its options)\n\ncommands:\n");
  std::vector<Command> sorted = table();
  std::sort(sorted.begin(), sorted.end(),
            [](const Command& a, const Command& b) { return std::string(a.name) < b.name; });
  for (const Command& c : sorted) std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
}

}  // namespace

bool register_command(const Command& command) {
  table().push_back(command);
  return true;
}

const std::vector<Command>& commands() { return table(); }

}  // namespace pshard::app

int main(int argc, char** argv) {
  using pshard::app::commands;
  // model.name and optimizer.name take the names of the model zoo and of the optimizer library, checked
  // whenever a command reads a config (common keeps no copy).
  pshard::install_config_choices("model.name", pshard::models::model_names());
  pshard::install_config_choices("optimizer.name", pshard::optim::optimizer_names());
  // embedding.optimizer: same (optimizer.name's rule) or a rule that updates a row on its own (not lars or lamb,
  // whose ratio is over a whole layer).
  std::vector<std::string> table_rules = {"same"};
  for (const std::string& rule : pshard::optim::optimizer_names()) {
    pshard::optim::OptimizerParams p;
    p.name = rule;
    if (!pshard::optim::make_optimizer(p)->layer_wise()) table_rules.push_back(rule);
  }
  pshard::install_config_choices("embedding.optimizer", table_rules);
  if (argc < 2) {
    pshard::app::print_usage(stderr);
    return 2;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    pshard::app::print_usage(stdout);
    return 0;
  }
  if (name == "--version") {
    std::printf("pshard 0.1.0\n");
    return 0;
  }
  for (const pshard::app::Command& c : commands()) {
    if (name != c.name) continue;
    try {
      return c.run(std::vector<std::string>(argv + 2, argv + argc));
    } catch (const pshard::Error& e) {
      // Argument errors already start with "pshard <command>: "; say it once.
      std::string what = e.what();
      const std::string self = std::string("pshard ") + c.name + ": ";
      if (what.compare(0, self.size(), self) == 0) what.erase(0, self.size());
      std::fprintf(stderr, "pshard %s: error: %s\n", c.name, what.c_str());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "pshard %s: internal error: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "pshard: unknown command '%s'\n\n", name.c_str());
  pshard::app::print_usage(stderr);
  return 2;
}
