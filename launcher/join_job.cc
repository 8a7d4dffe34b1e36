// Joining a running elastic job: run and watch the worker the launch described in RUN_DIR/join.json.
#include "launcher/join_job.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "common/control/process_notice.h"
#include "common/error.h"
#include "common/run/run_directory.h"
#include "common/util/binary_file.h"
#include "common/util/json.h"
#include "common/util/private_file.h"
#include "launcher/local_job.h"

namespace pshard {
namespace {

std::vector<std::string> strings(const Json& doc, const char* key, const std::string& path) {
  if (!doc.is_object() || !doc.has(key) || !doc.at(key).is_array()) {
    throw Error("pshard join: " + path + " has no list \"" + key + "\" (not written by pshard launch?)");
  }
  std::vector<std::string> out;
  for (const Json& e : doc.at(key).elements()) {
    if (!e.is_string()) throw Error("pshard join: " + path + ": \"" + key + "\" holds a non-string");
    out.push_back(e.as_string());
  }
  return out;
}

std::string text(const Json& doc, const char* key, const std::string& path) {
  if (!doc.is_object() || !doc.has(key) || !doc.at(key).is_string()) {
    throw Error("pshard join: " + path + " has no text \"" + key +
                "\" (not written by this version of pshard launch?)");
  }
  return doc.at(key).as_string();
}

// Whether something listens at the coordinator address "tcp://HOST:PORT" (a TCP connect within 2 s). A launch that
// was killed (SIGKILL) leaves its join file behind; its coordinator is gone with it.
bool coordinator_listens(const std::string& address) {
  const std::string prefix = "tcp://";
  const size_t colon = address.rfind(':');
  if (address.compare(0, prefix.size(), prefix) != 0 || colon == std::string::npos || colon < prefix.size()) {
    return true;  // not an address this probe understands: let the worker find out
  }
  const std::string host = address.substr(prefix.size(), colon - prefix.size());
  const std::string port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) return true;
  bool listens = false;
  for (addrinfo* a = found; a != nullptr && !listens; a = a->ai_next) {
    const int sock = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (sock < 0) continue;
    if (::connect(sock, a->ai_addr, a->ai_addrlen) == 0) {
      listens = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{sock, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof err;
      listens = ::poll(&p, 1, 2000) == 1 && ::getsockopt(sock, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
    ::close(sock);
  }
  ::freeaddrinfo(found);
  return listens;
}

}  // namespace

// How `pshard join RUN_DIR` starts one more worker (its command line and environment, with the job token: a 0600 file,
// like the token file of `pshard task`).
void write_join_file(const std::string& run_dir, const JobPlan& plan) {
  const ChildSpec worker = plan.worker_process(-1);  // no rank: the coordinator gives it a free one
  Json argv = Json::array(), env = Json::array();
  for (const std::string& a : worker.argv) argv.push(a);
  for (const std::string& e : worker.env) env.push(e);
  // A program after -- may name its script relative to where the launch runs.
  const std::string cwd = std::filesystem::current_path().string();
  // The coordinator, token and keys: pshard join probes the job and tells the coordinator when its worker dies.
  Json doc = Json::object()
                 .set("argv", argv)
                 .set("env", env)
                 .set("cwd", cwd)
                 .set("coordinator", plan.coordinator)
                 .set("job_token", plan.job_token);
  if (!plan.key_dir.empty()) doc.set("key_dir", plan.key_dir);
  binary::write_file_atomically(run_dir + "/" + kJoinFile, doc.dump() + "\n", "join file", 0600);
}

int join_running_job(const std::string& run_dir) {
  const std::string path = (std::filesystem::path(run_dir) / kJoinFile).string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw Error("pshard join: " + path +
                " does not exist: only an elastic job started by `pshard launch --workers MIN:MAX` takes new workers "
                "(is " +
                run_dir + " its run directory, and is the job running?)");
  }
  // The file says what to run as this user: only one that this user alone controls is followed (a launch writes
  // it 0600 in its run directory).
  const Json doc = Json::parse(read_private_file(path, "join file", 1 << 20), "join file " + path);
  const std::vector<std::string> argv = strings(doc, "argv", path);
  const std::vector<std::string> env = strings(doc, "env", path);
  if (argv.empty()) throw Error("pshard join: " + path + ": the worker's command line is empty");
  // The job's coordinator, token and keys, for the probe below and the notice of the worker's end.
  const std::string coordinator = text(doc, "coordinator", path);
  const std::string token = text(doc, "job_token", path);
  const std::string key_dir = doc.has("key_dir") ? text(doc, "key_dir", path) : std::string();
  if (!coordinator_listens(coordinator)) {
    throw Error("the job of " + run_dir + " is not running: its coordinator (" + coordinator + ") does not answer; " +
                path + " is left from a launch that ended without removing it (killed?)");
  }
  if (doc.has("cwd") && doc.at("cwd").is_string()) {
    std::error_code cd;
    std::filesystem::current_path(doc.at("cwd").as_string(), cd);
    if (cd)
      throw Error("pshard join: cannot enter the launch's directory " + doc.at("cwd").as_string() + ": " +
                  cd.message());
  }
  // The worker's environment is this one's with the job's variables (PSHARD_JOB_TOKEN, ...) set; the coordinator
  // gives it a free rank.
  ::unsetenv("PSHARD_RANK");

  // The worker runs as a child that this process watches, as pshard launch watches its own: when it dies, the
  // coordinator hears so at once (it would otherwise keep the worker in the next epoch's plan until
  // cluster.heartbeat_timeout_ms). Ctrl-C or SIGTERM here stop the worker, which leaves the job cleanly.
  const transport::CurveKeys keys = key_dir.empty() ? transport::CurveKeys{} : transport::read_curve_keys(key_dir);
  ProcessNotifier notices(coordinator, token, keys);
  LocalJob::Options opt;
  opt.handle_signals = true;
  opt.on_child_failed = [&notices](const ChildSpec&, const ChildExit& how) {
    notices.process_ended(NodeRole::kWorker, std::nullopt, how.pid, how.ending());
  };
  LocalJob job(opt);
  ChildSpec worker;
  worker.name = "worker";
  worker.argv = argv;
  worker.env = env;
  worker.role = NodeRole::kWorker;
  job.add(worker);
  const LocalJob::Result r = job.run();
  if (r.exit_code != 0 && !r.failure.empty()) std::fprintf(stderr, "error: pshard join: %s\n", r.failure.c_str());
  return r.exit_code;
}

}  // namespace pshard
