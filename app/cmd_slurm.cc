// `pshard slurm`: one task of an srun step; derives its role from SLURM_* and runs it (task 0 also runs the
// coordinator).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "app/command.h"
#include "common/config/config.h"
#include "common/error.h"
#include "common/transport/curve.h"
#include "common/util/args.h"
#include "common/util/json.h"
#include "launcher/local_job.h"
#include "launcher/slurm/node_address.h"
#include "launcher/slurm/placement.h"

namespace pshard::app {
namespace {

std::string random_hex128() {
  std::random_device rd;  // /dev/urandom
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return buf;
}

// The job token when PSHARD_JOB_TOKEN is not set: task 0 writes a random one
// into a 0600 file in the (shared) run directory, the others wait for it.
std::string token_from_file(const std::string& path, bool create, std::chrono::milliseconds timeout) {
  if (create) {
    const std::string token = random_hex128();
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) throw Error("cannot create the job token file " + tmp + ": " + std::strerror(errno));
    const bool ok = ::write(fd, token.data(), token.size()) == static_cast<ssize_t>(token.size()) && ::fsync(fd) == 0;
    ::close(fd);
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
      ::unlink(tmp.c_str());
      throw Error("cannot write the job token file " + path + ": " + std::strerror(errno));
    }
    return token;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::ifstream in(path);
    std::string token;
    if (in && std::getline(in, token) && token.size() == 32) return token;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Error("no job token: " + path + " (written by task 0 on the first node) did not appear within " +
                  std::to_string(timeout.count()) +
                  " ms. Is the run directory on a filesystem all nodes share? Or export PSHARD_JOB_TOKEN in the "
                  "batch script (see launcher/slurm/templates)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// security.curve: task 0 creates the key file if it is missing; the others wait for it (shared run directory).
void wait_for_key_file(const std::string& key_dir, std::chrono::milliseconds timeout) {
  const std::string path = transport::curve_key_file(key_dir);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Error("no CurveZMQ key file: " + path + " (created by task 0 on the first node) did not appear within " +
                  std::to_string(timeout.count()) +
                  " ms. Is the key directory on a filesystem all nodes share? Set security.key_dir or --key-dir");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  transport::read_curve_keys(key_dir);  // refuses a file others can read, before any process starts
}

int run_slurm(const std::vector<std::string>& args) {
  ArgParser p("pshard slurm",
              "run as every task of an srun step (`srun pshard slurm --config F`): each task derives its role and "
              "rank from SLURM_PROCID/NTASKS/NODEID/LOCALID and the node list. By default the first "
              "--servers-per-node tasks of each node are servers and the rest workers; with --server-nodes K the "
              "first K nodes hold only servers. The first task of the first node also runs the coordinator, on a "
              "port derived from SLURM_JOB_ID. The job token is PSHARD_JOB_TOKEN, else a random one task 0 writes "
              "to a 0600 file in the run directory (which must be shared). See docs/SLURM.md.");
  p.add_option("config", "FILE", "experiment config (TOML), on a filesystem every node sees", true);
  p.add_multi("set", "KEY=VALUE", "override a config key");
  p.add_option("run-dir", "DIR", "run directory, shared by all nodes (default runs/<run.name> under the cwd)");
  p.add_option("servers-per-node", "N", "servers among each node's tasks (without --server-nodes)", false, "1");
  p.add_option("server-nodes", "K", "dedicated server nodes: every task on the first K nodes is a server", false, "0");
  p.add_option("port", "P", "coordinator port (default 10000 + (SLURM_JOB_ID % 2500) * 8 + SLURM_STEP_ID % 8)");
  p.add_option("iface", "IFACE", "advertise this interface's IPv4 address (default: the address of the node name)");
  p.add_option("key-dir", "DIR",
               "security.curve: the job's key directory, shared by all nodes (default: security.key_dir, else "
               "RUN_DIR/keys); task 0 creates curve.keys there if missing");
  p.add_option("coordinator-host", "HOST", "reach the coordinator at HOST (default: the first node's name)");
  p.add_option("grace-ms", "MS", "how long this task's processes get to exit after SIGTERM before SIGKILL", false,
               "5000");
  p.add_flag("dry-run", "print this task's role, rank and addresses as one JSON line and exit");
  if (!p.parse(args)) return 0;

  const std::string config_path = std::filesystem::absolute(p.get("config")).string();
  Config cfg = Config::from_file(config_path, p.get_all("set"));
  const slurm::SlurmEnv env = slurm::SlurmEnv::read([](const char* k) { return std::getenv(k); });
  slurm::Placement placement;
  placement.servers_per_node = static_cast<int>(p.get_int("servers-per-node"));
  placement.server_nodes = static_cast<int>(p.get_int("server-nodes"));
  const slurm::TaskPlan plan = slurm::plan_task(env, placement);

  int port = slurm::coordinator_port(env.job_id, env.step_id);
  if (p.has("port")) {
    const int64_t v = p.get_int("port");
    if (v < 1 || v > 65535) throw Error("pshard slurm: --port must be in 1..65535, got " + p.get("port"));
    port = static_cast<int>(v);
  }
  const std::string iface = p.has("iface") ? p.get("iface") : "";
  // Servers bind their advertised address and the coordinator's node must be
  // reachable under its name: check both now, with errors that say what to do.
  std::string address;
  if (plan.role == NodeRole::kServer || plan.runs_coordinator) {
    address = slurm::advertised_address(plan.node, iface);
  }
  const std::string coord_host = p.has("coordinator-host") ? p.get("coordinator-host") : plan.first_node;
  const std::string coordinator = "tcp://" + slurm::resolve_ipv4(coord_host) + ":" + std::to_string(port);
  const std::string run_dir =
      std::filesystem::absolute(p.has("run-dir") ? p.get("run-dir") : "runs/" + cfg.get_string("run.name")).string();
  const std::string gpu = plan.role == NodeRole::kWorker ? slurm::worker_gpu(env, plan.local_role_index) : "";
  const std::string role = role_name(plan.role);
  const std::string what = "task " + std::to_string(env.proc_id) + "/" + std::to_string(env.num_tasks) + " on " +
                           plan.node + ": " + role + " " + std::to_string(plan.rank) + " (" +
                           std::to_string(plan.num_servers) + " servers, " + std::to_string(plan.num_workers) +
                           " workers" + (plan.runs_coordinator ? ", runs the coordinator" : "") + "), coordinator " +
                           coordinator;

  if (p.flag("dry-run")) {
    Json j = Json::object()
                 .set("proc_id", env.proc_id)
                 .set("node", plan.node)
                 .set("role", role)
                 .set("rank", static_cast<int64_t>(plan.rank))
                 .set("num_servers", static_cast<int64_t>(plan.num_servers))
                 .set("num_workers", static_cast<int64_t>(plan.num_workers))
                 .set("runs_coordinator", plan.runs_coordinator)
                 .set("coordinator", coordinator)
                 .set("address", address)
                 .set("cuda_visible_devices", gpu)
                 .set("run_dir", run_dir);
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }

  std::filesystem::create_directories(run_dir);
  if (plan.runs_coordinator) {
    std::ofstream out(run_dir + "/config.toml");
    out << cfg.to_toml();
    if (!out) throw Error("pshard slurm: cannot write " + run_dir + "/config.toml");
  }
  std::string token;
  std::string token_file;
  if (const char* t = std::getenv("PSHARD_JOB_TOKEN"); t != nullptr && *t != '\0') {
    token = t;
  } else {
    const char* restart = std::getenv("SLURM_RESTART_COUNT");
    token_file = run_dir + "/.slurm-token-" + std::to_string(env.job_id) + "." + std::to_string(env.step_id) + "." +
                 (restart ? restart : "0");
    token = token_from_file(token_file, plan.runs_coordinator,
                            std::chrono::milliseconds(cfg.get_int("cluster.rendezvous_timeout_ms")));
  }

  std::vector<std::string> common = {"--config", config_path};
  for (const std::string& s : p.get_all("set")) {
    common.push_back("--set");
    common.push_back(s);
  }
  common.push_back("--run-dir");
  common.push_back(run_dir);
  if (cfg.get_bool("security.curve")) {
    const std::string key_dir = transport::curve_key_dir(cfg, p.get("key-dir"), run_dir);
    if (plan.runs_coordinator) {
      transport::ensure_curve_keys(key_dir);
    } else {
      wait_for_key_file(key_dir, std::chrono::milliseconds(cfg.get_int("cluster.rendezvous_timeout_ms")));
    }
    common.push_back("--key-dir");
    common.push_back(key_dir);
  }

  LocalJob::Options opt;
  opt.handle_signals = true;  // scancel / srun's SIGTERM stop this task's processes
  opt.grace = std::chrono::milliseconds(p.get_int("grace-ms"));
  LocalJob job(opt);
  const std::string self = self_executable();
  if (plan.runs_coordinator) {
    ChildSpec c;
    c.name = "coordinator";
    c.argv = {self,        "coordinator",
              "--servers", std::to_string(plan.num_servers),
              "--workers", std::to_string(plan.num_workers),
              "--bind",    "tcp://0.0.0.0:" + std::to_string(port)};
    c.argv.insert(c.argv.end(), common.begin(), common.end());
    c.env = {"PSHARD_JOB_TOKEN=" + token};
    c.ends_job = true;
    job.add(c);
  }
  ChildSpec c;
  c.name = role + " " + std::to_string(plan.rank);
  c.argv = {self, role, "--coordinator", coordinator};
  c.argv.insert(c.argv.end(), common.begin(), common.end());
  if (plan.role == NodeRole::kServer) {
    c.argv.push_back("--bind");
    c.argv.push_back("tcp://" + address + ":0");
  }
  c.env = {"PSHARD_JOB_TOKEN=" + token, "PSHARD_RANK=" + std::to_string(plan.rank)};
  if (!gpu.empty()) c.env.push_back("CUDA_VISIBLE_DEVICES=" + gpu);
  job.add(c);

  std::fprintf(stderr, "[slurm] %s%s%s, run dir %s\n", what.c_str(), address.empty() ? "" : ", address ",
               address.c_str(), run_dir.c_str());
  LocalJob::Result r = job.run();
  if (plan.runs_coordinator && !token_file.empty()) ::unlink(token_file.c_str());
  for (const ChildExit& e : r.children) {
    if (e.failed())
      std::fprintf(stderr, "[slurm] task %lld: %s\n", static_cast<long long>(env.proc_id), e.describe().c_str());
  }
  return r.exit_code;
}

}  // namespace

PSHARD_COMMAND(slurm, "run one task of an srun step: role and rank from SLURM_* (see docs/SLURM.md)", run_slurm);

}  // namespace pshard::app
