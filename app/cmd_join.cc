// `pshard join`: one more worker for a running elastic job (launcher/join_job.h).
#include "app/command.h"
#include "common/error.h"
#include "common/util/args.h"
#include "launcher/join_job.h"

namespace pshard::app {
namespace {

int run_join(const std::vector<std::string>& args) {
  ArgParser p("pshard join",
              "add a worker to a running elastic job (pshard launch --workers MIN:MAX): it takes a free rank and "
              "trains from the next epoch's start, with the job's config and token (RUN_DIR/join.json). Runs in the "
              "foreground until the job ends; run it once per worker to add.");
  p.allow_positionals("RUN_DIR", "the running job's run directory");
  if (!p.parse(args)) return 0;
  if (p.positionals().size() != 1) throw Error("pshard join: give the running job's RUN_DIR (see --help)");
  return join_running_job(p.positionals().front());
}

}  // namespace

PSHARD_COMMAND(join, "add a worker to a running elastic job (pshard launch --workers MIN:MAX)", run_join);

}  // namespace pshard::app
