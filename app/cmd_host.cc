// `pshard host`: one host's share of a `pshard launch --hosts` job; the launcher starts it over ssh and sends the
// plan on stdin (launcher/remote/host_agent.h).
#include <unistd.h>

#include "app/command.h"
#include "common/util/args.h"
#include "launcher/remote/host_agent.h"

namespace pshard::app {
namespace {

int run_host(const std::vector<std::string>& args) {
  ArgParser p("pshard host",
              "run this host's share of a `pshard launch --hosts` job: `pshard launch` starts it over ssh and sends "
              "the host's processes, the job token and the CurveZMQ keys as one JSON line on stdin (never on a "
              "command line). When stdin ends (the launcher stopped, died or lost its connection), every process "
              "gets SIGTERM, then SIGKILL after the grace period. Not meant to be run by hand.");
  p.add_option("name", "HOST", "the host's name, for messages", true);
  if (!p.parse(args)) return 0;
  return remote::run_host_agent(p.get("name"), STDIN_FILENO);
}

}  // namespace

PSHARD_COMMAND(host, "run one host's share of a `pshard launch --hosts` job (started by the launcher over ssh)",
               run_host);

}  // namespace pshard::app
