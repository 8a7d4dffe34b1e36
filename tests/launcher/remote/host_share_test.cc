// `pshard launch --hosts` pieces without ssh: the host list, the host plan message (round trip and refusals), the
// ssh command and its shell quoting, and the placement of a 3-host job.
#include "launcher/remote/host_share.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "launcher/remote/host_list.h"
#include "launcher/remote/remote_job.h"
#include "tests/support/error_of.h"

namespace pshard::remote {
namespace {

using pshard::testing::error_of;

TEST(HostList, ParsesTargetsNamesAndCounts) {
  const std::vector<RemoteHost> h = parse_hosts("node1:2,alice@node2:3,node3");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].target, "node1");
  EXPECT_EQ(h[0].name, "node1");
  EXPECT_EQ(h[0].workers, 2);
  EXPECT_EQ(h[1].target, "alice@node2");
  EXPECT_EQ(h[1].name, "node2");
  EXPECT_EQ(h[1].workers, 3);
  EXPECT_EQ(h[2].workers, 1);
}

TEST(HostList, RefusesBadEntriesNamingThem) {
  EXPECT_NE(error_of([] { parse_hosts("a:2,,b"); }).find("an empty entry"), std::string::npos);
  EXPECT_NE(error_of([] { parse_hosts("a:x"); }).find("the worker count of 'a:x' must be a number in 0..1024"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_hosts("a:2000"); }).find("'a:2000'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_hosts("a:1,a:2"); }).find("a is listed twice"), std::string::npos);
  EXPECT_NE(error_of([] { parse_hosts("u@a:1,a:2"); }).find("a is listed twice"), std::string::npos);
  EXPECT_NE(error_of([] { parse_hosts("a:0,b:0"); }).find("no host runs a worker"), std::string::npos);
  EXPECT_NE(error_of([] { parse_hosts("-oProxyCommand=x:1"); }).find("is not a host name"), std::string::npos);
  EXPECT_NE(error_of([] { parse_hosts("a b:1"); }).find("is not a host name"), std::string::npos);
}

TEST(HostShare, RoundTripsThroughOneJsonLine) {
  HostShare s;
  s.host = "node2";
  s.run_dir = "/runs/x";
  s.key_dir = "/runs/x/keys";
  s.keys = {"sp", "ss", "cp", "cs"};
  s.assign_gpus = true;
  s.grace_ms = 1234;
  RemoteProcess w;
  w.spec.name = "worker 3";
  w.spec.role = NodeRole::kWorker;
  w.spec.rank = 3;
  w.spec.argv = {"/opt/pshard", "worker", "--config", "it's.toml"};
  w.spec.env = {"PSHARD_JOB_TOKEN=0123456789abcdef0123456789abcdef", "PSHARD_RANK=3"};
  w.local_rank = 1;
  w.spec.may_fail = true;  // cluster.failure_policy = continue
  w.restart = w.spec;      // cluster.restart_workers: rejoins on this host
  w.restart.argv.push_back("--join");
  w.max_restarts = 3;
  s.coordinator = "tcp://10.0.0.1:4242";
  s.job_token = "0123456789abcdef0123456789abcdef";
  s.drops_workers = true;
  RemoteProcess c;
  c.spec.name = "coordinator";
  c.spec.role = NodeRole::kCoordinator;
  c.spec.argv = {"/opt/pshard", "coordinator"};
  c.spec.ends_job = true;
  s.processes = {c, w};
  const std::string line = s.to_json();
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const HostShare r = HostShare::from_json(line);
  EXPECT_EQ(r.host, "node2");
  EXPECT_EQ(r.run_dir, "/runs/x");
  EXPECT_EQ(r.key_dir, "/runs/x/keys");
  EXPECT_EQ(r.keys.server_secret, "ss");
  EXPECT_EQ(r.keys.client_secret, "cs");
  EXPECT_TRUE(r.assign_gpus);
  EXPECT_EQ(r.grace_ms, 1234);
  ASSERT_EQ(r.processes.size(), 2u);
  EXPECT_TRUE(r.processes[0].spec.ends_job);
  EXPECT_EQ(r.processes[0].spec.role, NodeRole::kCoordinator);
  EXPECT_EQ(r.processes[0].local_rank, -1);
  EXPECT_EQ(r.processes[1].spec.name, "worker 3");
  EXPECT_EQ(r.processes[1].spec.rank, std::optional<int64_t>(3));
  EXPECT_FALSE(r.processes[0].spec.rank.has_value());
  EXPECT_EQ(r.processes[1].spec.argv, w.spec.argv);
  EXPECT_EQ(r.processes[1].spec.env, w.spec.env);
  EXPECT_EQ(r.processes[1].local_rank, 1);
  EXPECT_FALSE(r.processes[1].spec.ends_job);
  EXPECT_TRUE(r.processes[1].spec.may_fail);
  EXPECT_FALSE(r.processes[0].spec.may_fail);
  EXPECT_EQ(r.processes[1].max_restarts, 3);
  EXPECT_EQ(r.processes[1].restart.argv, w.restart.argv);
  EXPECT_EQ(r.processes[1].restart.env, w.spec.env);
  EXPECT_EQ(r.processes[1].restart.name, "worker 3");
  EXPECT_EQ(r.processes[0].max_restarts, 0);
  EXPECT_EQ(r.coordinator, "tcp://10.0.0.1:4242");
  EXPECT_EQ(r.job_token, "0123456789abcdef0123456789abcdef");
  EXPECT_TRUE(r.drops_workers);
}

TEST(HostShare, RefusesMalformedPlansNamingTheField) {
  EXPECT_NE(error_of([] { HostShare::from_json("[1]"); }).find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of([] { HostShare::from_json("{\"host\":\"a\"}"); }).find("has no \"run_dir\""), std::string::npos);
  EXPECT_NE(error_of([] { HostShare::from_json("{nope"); }).find("host plan"), std::string::npos);
  HostShare s;
  s.host = "a";
  RemoteProcess p;
  p.spec.name = "worker 0";
  p.spec.role = NodeRole::kWorker;
  p.spec.argv = {"/bin/true"};
  p.spec.env = {"=x"};
  s.processes = {p};
  const std::string bad_env = s.to_json();
  EXPECT_NE(error_of([&] { HostShare::from_json(bad_env); }).find("process 'worker 0' env entry is not KEY=VALUE"),
            std::string::npos);
  s.processes[0].spec.env.clear();
  s.processes[0].max_restarts = 2;
  s.processes[0].restart.argv = {"/bin/true"};
  s.processes[0].restart.env = {"NOEQUALS"};
  const std::string bad_restart_env = s.to_json();
  EXPECT_NE(error_of([&] {
              HostShare::from_json(bad_restart_env);
            }).find("process 'worker 0' restart_env entry is not KEY=VALUE"),
            std::string::npos);
  s.processes[0].max_restarts = 0;
  s.processes[0].spec.argv.clear();
  const std::string no_argv = s.to_json();
  EXPECT_NE(error_of([&] { HostShare::from_json(no_argv); }).find("process 'worker 0' has an empty argv"),
            std::string::npos);
  s.processes.clear();
  const std::string none = s.to_json();
  EXPECT_NE(error_of([&] { HostShare::from_json(none); }).find("\"processes\" is not a non-empty array"),
            std::string::npos);
}

TEST(SshCommand, SplitsPshardSshAndQuotesTheRemoteCommand) {
  EXPECT_EQ(ssh_command(nullptr), std::vector<std::string>{"ssh"});
  EXPECT_EQ(ssh_command("  "), std::vector<std::string>{"ssh"});
  EXPECT_EQ(ssh_command(" ssh -p 2222  -i /k "), (std::vector<std::string>{"ssh", "-p", "2222", "-i", "/k"}));
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  RemoteHost h{"bob@node1", "node1", 2};
  HostShare s;
  s.host = "node1";
  s.processes.resize(1);
  s.processes[0].spec.argv = {"/opt/p s/pshard", "worker"};
  s.processes[0].spec.env = {"PSHARD_JOB_TOKEN=secret-token-value"};
  const ChildSpec c = ssh_host_process(h, s, {"ssh", "-p", "2222"}, "/opt/p s/pshard");
  EXPECT_EQ(c.name, "host node1");
  ASSERT_EQ(c.argv.size(), 8u);
  EXPECT_EQ(std::vector<std::string>(c.argv.begin(), c.argv.begin() + 7),
            (std::vector<std::string>{"ssh", "-p", "2222", "-T", "-o", "BatchMode=yes", "bob@node1"}));
  // The remote command: sh runs the agent and names its death by a signal (ssh alone would say 255).
  EXPECT_EQ(c.argv[7].rfind("exec /bin/sh -c ''\\''/opt/p s/pshard'\\'' host --name '\\''node1'\\''; s=$?;", 0), 0u)
      << c.argv[7];
  EXPECT_NE(c.argv[7].find("was killed by signal"), std::string::npos) << c.argv[7];
  // The secrets travel on stdin only.
  for (const std::string& a : c.argv) EXPECT_EQ(a.find("secret-token-value"), std::string::npos) << a;
  EXPECT_NE(c.stdin_text.find("secret-token-value"), std::string::npos);
  EXPECT_EQ(c.stdin_text.back(), '\n');
}

// The remote command as a remote shell runs it: an agent killed by a signal is named with the signal, and the command
// exits 128 + N (ssh alone would turn that death into its own status 255); an agent's own status passes through.
TEST(SshCommand, TheRemoteCommandNamesAnAgentKilledByASignal) {
  char dir[] = "/tmp/pshard-test-remote-command-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  auto run = [&](const std::string& agent_body, std::string* output) {
    const std::string agent = std::string(dir) + "/agent it's";
    {
      std::ofstream f(agent);
      f << "#!/bin/sh\n" << agent_body << "\n";
    }
    ::chmod(agent.c_str(), 0700);
    const ChildSpec c = ssh_host_process(RemoteHost{"node1", "node1", 1}, HostShare{}, {"ssh"}, agent);
    const std::string command = "/bin/sh -c " + shell_quote(c.argv.back()) + " 2>&1 </dev/null";
    FILE* p = ::popen(command.c_str(), "r");
    char buf[256];
    output->clear();
    while (p && std::fgets(buf, sizeof buf, p)) *output += buf;
    const int status = p ? ::pclose(p) : -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string out;
  EXPECT_EQ(run("kill -KILL $$", &out), 137);
  EXPECT_NE(out.find("error: the host agent (pshard host) was killed by signal 9 (SIGKILL)"), std::string::npos) << out;
  EXPECT_EQ(run("echo agent said $1 $3; exit 3", &out), 3);
  EXPECT_EQ(out, "agent said host node1\n");
  std::remove((std::string(dir) + "/agent it's").c_str());
  ::rmdir(dir);
}

TEST(RemoteJob, PlacesTheCoordinatorFirstAndSpreadsServers) {
  RemoteJobOptions o;
  o.hosts = parse_hosts("127.0.0.1:2,127.0.0.2:1,127.0.0.3:0");
  o.servers = 5;
  o.port = 4242;
  o.remote_pshard = "/opt/pshard";
  o.ssh = {"ssh"};
  JobPlan plan;
  plan.config_path = "/c.toml";
  plan.job_token = "0123456789abcdef0123456789abcdef";
  plan.num_servers = 5;
  plan.num_workers = 3;
  LocalJob job(LocalJob::Options{});
  const std::vector<std::string> placement = add_host_processes(o, plan, job);
  EXPECT_EQ(plan.coordinator, "tcp://127.0.0.1:4242");
  ASSERT_EQ(placement.size(), 3u);
  EXPECT_EQ(placement[0], "127.0.0.1 (127.0.0.1): coordinator, server 0, server 3, workers 0-1");
  EXPECT_EQ(placement[1], "127.0.0.2 (127.0.0.2): server 1, server 4, worker 2");
  EXPECT_EQ(placement[2], "127.0.0.3 (127.0.0.3): server 2");
  // No --port: a random one below Linux's ephemeral ports (32768..60999), which connections and their TIME_WAIT hold.
  for (int i = 0; i < 50; ++i) {
    RemoteJobOptions r = o;
    r.port = 0;
    JobPlan rplan = plan;
    host_processes(r, rplan);
    const int port = std::stoi(rplan.coordinator.substr(rplan.coordinator.rfind(':') + 1));
    EXPECT_GE(port, 20000);
    EXPECT_LT(port, 32768);
  }
  // Under failure_policy = continue a host of workers alone may end early; restart_workers restarts them there.
  RemoteJobOptions c = o;
  c.hosts = parse_hosts("127.0.0.1:1,127.0.0.2:1,127.0.0.3:1");
  c.servers = 1;
  c.workers_may_fail = true;
  c.max_worker_restarts = 2;
  JobPlan cplan = plan;
  const std::vector<ChildSpec> hosts = host_processes(c, cplan);
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_FALSE(hosts[0].may_fail);  // the coordinator's and server 0's host
  EXPECT_TRUE(hosts[0].ends_job);
  EXPECT_TRUE(hosts[1].may_fail);
  EXPECT_TRUE(hosts[2].may_fail);
  const HostShare third = HostShare::from_json(hosts[2].stdin_text);
  ASSERT_EQ(third.processes.size(), 1u);
  EXPECT_EQ(third.processes[0].spec.name, "worker 2");
  EXPECT_TRUE(third.processes[0].spec.may_fail);
  EXPECT_EQ(third.processes[0].max_restarts, 2);
  EXPECT_EQ(third.processes[0].restart.argv.back(), "--join");
  EXPECT_EQ(third.coordinator, "tcp://127.0.0.1:4242");
  EXPECT_EQ(third.job_token, plan.job_token);
  // A host that would run nothing is refused.
  o.servers = 2;
  LocalJob job2(LocalJob::Options{});
  EXPECT_NE(error_of([&] { add_host_processes(o, plan, job2); }).find("127.0.0.3 would run nothing"),
            std::string::npos);
}

}  // namespace
}  // namespace pshard::remote
