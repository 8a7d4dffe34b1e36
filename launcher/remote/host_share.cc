// The message a `pshard launch --hosts` launcher sends each host, and the ssh command that carries it (see
// host_share.h).
#include "launcher/remote/host_share.h"

#include "common/error.h"
#include "common/util/json.h"

namespace pshard::remote {
namespace {

Json strings(const std::vector<std::string>& items) {
  Json a = Json::array();
  for (const std::string& s : items) a.push(s);
  return a;
}

std::vector<std::string> strings_of(const Json& a, const std::string& what) {
  if (!a.is_array()) throw Error("host plan: " + what + " is not an array");
  std::vector<std::string> out;
  for (const Json& e : a.elements()) {
    if (!e.is_string()) throw Error("host plan: " + what + " holds a non-string");
    out.push_back(e.as_string());
  }
  return out;
}

// An environment: KEY=VALUE entries.
std::vector<std::string> env_of(const Json& a, const std::string& what) {
  std::vector<std::string> env = strings_of(a, what);
  for (const std::string& e : env) {
    if (e.find('=') == std::string::npos || e.front() == '=')
      throw Error("host plan: " + what + " entry is not KEY=VALUE");
  }
  return env;
}

const Json& field(const Json& j, const std::string& key, const std::string& where) {
  if (!j.has(key)) throw Error("host plan: " + where + " has no \"" + key + "\"");
  return j.at(key);
}

}  // namespace

std::string HostShare::to_json() const {
  Json procs = Json::array();
  for (const RemoteProcess& p : processes) {
    procs.push(Json::object()
                   .set("name", p.spec.name)
                   .set("role", p.spec.role ? role_name(*p.spec.role) : "")
                   .set("rank", p.spec.rank.value_or(-1))
                   .set("argv", strings(p.spec.argv))
                   .set("env", strings(p.spec.env))
                   .set("ends_job", p.spec.ends_job)
                   .set("may_fail", p.spec.may_fail)
                   .set("local_rank", p.local_rank)
                   .set("max_restarts", p.max_restarts)
                   .set("restart_argv", strings(p.restart.argv))
                   .set("restart_env", strings(p.restart.env)));
  }
  return Json::object()
      .set("host", host)
      .set("run_dir", run_dir)
      .set("key_dir", key_dir)
      .set("keys", strings({keys.server_public, keys.server_secret, keys.client_public, keys.client_secret}))
      .set("assign_gpus", assign_gpus)
      .set("grace_ms", grace_ms)
      .set("coordinator", coordinator)
      .set("job_token", job_token)
      .set("drops_workers", drops_workers)
      .set("processes", procs)
      .dump();
}

HostShare HostShare::from_json(const std::string& line) {
  const Json j = Json::parse(line, "host plan");
  if (!j.is_object()) throw Error("host plan: not a JSON object");
  HostShare s;
  s.host = field(j, "host", "the plan").as_string();
  s.run_dir = field(j, "run_dir", "the plan").as_string();
  s.key_dir = field(j, "key_dir", "the plan").as_string();
  const std::vector<std::string> keys = strings_of(field(j, "keys", "the plan"), "keys");
  if (keys.size() != 4) throw Error("host plan: \"keys\" must hold 4 strings, not " + std::to_string(keys.size()));
  s.keys = {keys[0], keys[1], keys[2], keys[3]};
  if (!s.key_dir.empty() && !s.keys.enabled()) throw Error("host plan: a key_dir without keys");
  s.assign_gpus = field(j, "assign_gpus", "the plan").as_bool();
  s.grace_ms = field(j, "grace_ms", "the plan").as_int();
  if (s.grace_ms < 0 || s.grace_ms > 3600 * 1000) throw Error("host plan: grace_ms out of 0..3600000");
  s.coordinator = field(j, "coordinator", "the plan").as_string();
  s.job_token = field(j, "job_token", "the plan").as_string();
  s.drops_workers = field(j, "drops_workers", "the plan").as_bool();
  const Json& procs = field(j, "processes", "the plan");
  if (!procs.is_array() || procs.size() == 0) throw Error("host plan: \"processes\" is not a non-empty array");
  for (const Json& p : procs.elements()) {
    RemoteProcess r;
    const std::string where = "a process";
    r.spec.name = field(p, "name", where).as_string();
    const std::string w = "process '" + r.spec.name + "'";
    const std::string role = field(p, "role", w).as_string();
    for (NodeRole n : {NodeRole::kCoordinator, NodeRole::kServer, NodeRole::kWorker}) {
      if (role == role_name(n)) r.spec.role = n;
    }
    if (!role.empty() && !r.spec.role) throw Error("host plan: " + w + " has an unknown role '" + role + "'");
    const int64_t rank = field(p, "rank", w).as_int();
    if (rank >= 0) r.spec.rank = rank;
    r.spec.argv = strings_of(field(p, "argv", w), w + " argv");
    if (r.spec.argv.empty()) throw Error("host plan: " + w + " has an empty argv");
    r.spec.env = env_of(field(p, "env", w), w + " env");
    r.spec.ends_job = field(p, "ends_job", w).as_bool();
    r.spec.may_fail = field(p, "may_fail", w).as_bool();
    r.local_rank = field(p, "local_rank", w).as_int();
    const int64_t restarts = field(p, "max_restarts", w).as_int();
    if (restarts < 0 || restarts > 1000) throw Error("host plan: " + w + " max_restarts out of 0..1000");
    r.max_restarts = static_cast<int>(restarts);
    if (r.max_restarts > 0) {
      r.restart = r.spec;
      r.restart.argv = strings_of(field(p, "restart_argv", w), w + " restart_argv");
      r.restart.env = env_of(field(p, "restart_env", w), w + " restart_env");
      if (r.restart.argv.empty()) throw Error("host plan: " + w + " has max_restarts but an empty restart_argv");
    }
    s.processes.push_back(r);
  }
  return s;
}

std::vector<std::string> ssh_command(const char* pshard_ssh) {
  std::vector<std::string> out;
  const std::string text = pshard_ssh != nullptr ? pshard_ssh : "";
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t start = text.find_first_not_of(" \t", begin);
    if (start == std::string::npos) break;
    size_t end = text.find_first_of(" \t", start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    begin = end;
  }
  if (out.empty()) out.push_back("ssh");
  return out;
}

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

ChildSpec ssh_host_process(const RemoteHost& host, const HostShare& share, const std::vector<std::string>& ssh,
                           const std::string& remote_pshard) {
  ChildSpec c;
  c.name = "host " + host.name;
  c.argv = ssh;
  // -T: no terminal (the remote side ends on EOF, not on a hang-up); BatchMode: never ask for a password.
  for (const std::string& a : {std::string("-T"), std::string("-o"), std::string("BatchMode=yes"), host.target}) {
    c.argv.push_back(a);
  }
  // A shell waits for the agent instead of exec'ing it: ssh exits 255 both when it fails and when the command was
  // killed by a signal, so the shell names the agent's death (a line the launcher quotes) and exits 128 + N. The
  // script runs in sh whatever the remote user's login shell is.
  const std::string script = shell_quote(remote_pshard) + " host --name " + shell_quote(host.name) +
                             "; s=$?; if [ $s -gt 128 ]; then echo \"error: the host agent (pshard host) was killed by "
                             "signal $((s - 128)) (SIG$(kill -l $((s - 128))))\" >&2; fi; exit $s";
  c.argv.push_back("exec /bin/sh -c " + shell_quote(script));
  c.stdin_text = share.to_json() + "\n";
  c.sigterm_line = kSigtermLine;
  return c;
}

}  // namespace pshard::remote
