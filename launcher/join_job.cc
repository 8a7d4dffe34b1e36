// Joining a running elastic job: exec the worker the launch described in RUN_DIR/join.json.
#include "launcher/join_job.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "common/error.h"
#include "common/run/run_directory.h"
#include "common/util/json.h"
#include "common/util/private_file.h"

extern char** environ;

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

void join_running_job(const std::string& run_dir) {
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
  std::vector<std::string> env = strings(doc, "env", path);
  if (argv.empty()) throw Error("pshard join: " + path + ": the worker's command line is empty");
  for (const std::string& var : env) {
    const std::string name = "PSHARD_COORDINATOR=";
    if (var.compare(0, name.size(), name) != 0) continue;
    const std::string address = var.substr(name.size());
    if (!coordinator_listens(address)) {
      throw Error("the job of " + run_dir + " is not running: its coordinator (" + address + ") does not answer; " +
                  path + " is left from a launch that ended without removing it (killed?)");
    }
  }
  // The worker's environment is this one's with the job's variables (PSHARD_JOB_TOKEN, ...) set.
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string var(*e);
    const std::string name = var.substr(0, var.find('='));
    bool replaced = false;
    for (const std::string& mine : env) replaced = replaced || mine.compare(0, name.size() + 1, name + "=") == 0;
    if (!replaced && name != "PSHARD_RANK") env.push_back(var);
  }
  if (doc.has("cwd") && doc.at("cwd").is_string()) {
    std::error_code cd;
    std::filesystem::current_path(doc.at("cwd").as_string(), cd);
    if (cd)
      throw Error("pshard join: cannot enter the launch's directory " + doc.at("cwd").as_string() + ": " +
                  cd.message());
  }
  std::vector<char*> args, vars;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& v : env) vars.push_back(const_cast<char*>(v.c_str()));
  vars.push_back(nullptr);
  ::execvpe(args[0], args.data(), vars.data());  // a program after -- may be named without its path
  throw Error("pshard join: cannot run " + argv[0] + ": " + std::strerror(errno));
}

}  // namespace pshard
