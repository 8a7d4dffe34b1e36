// The `pshard` subcommand table: each subcommand registers itself from its
// own file in app/ with PSHARD_COMMAND.
#pragma once

#include <string>
#include <vector>

namespace pshard::app {

// Runs a subcommand with its arguments (argv after the subcommand name) and
// returns the process exit code. Errors are thrown as pshard::Error.
using CommandFn = int (*)(const std::vector<std::string>& args);

struct Command {
  const char* name;     // "train", "bench", ...
  const char* summary;  // one line for `pshard --help`
  CommandFn run;
};

// Adds a command to the table; used by PSHARD_COMMAND at static-init time.
bool register_command(const Command& command);
const std::vector<Command>& commands();

}  // namespace pshard::app

// Usage, at namespace scope in app/cmd_<name>.cc:
//   PSHARD_COMMAND(train, "train a model in one process", run_train);
#define PSHARD_COMMAND(name, summary, fn) \
  static const bool pshard_command_registered_##name = ::pshard::app::register_command({#name, summary, fn})
