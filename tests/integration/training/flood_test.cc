// A 1 x 1 synchronous job on 127.0.0.1 flooded with garbage and oversized frames (bounded: 20000 garbage messages
// and 20 oversized frames against the server and against the coordinator, from peers that hold the job token but
// never read a reply) and with 128 MiB unfinished messages from peers without the token: server and coordinator
// memory grow by less than 64 MiB, the log grows by less than 64 KiB, a stalled handshake is dropped after the
// handshake timeout, and the final model is bit-identical to an unattacked run's.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "common/transport/peer_auth.h"
#include "tests/support/raw_handshake.h"
#include "tests/support/run_helpers.h"

namespace {

using namespace pshard;
using pshard::testing::BackgroundJob;
using pshard::testing::fresh_dir;
using pshard::testing::pshard_bin;
using pshard::testing::read_file;
using pshard::testing::source_dir;
using Clock = std::chrono::steady_clock;

constexpr int64_t kMaxGrowthKiB = 64 * 1024;  // the most a flood may grow a process's RSS
constexpr size_t kMaxLogBytes = 64 * 1024;    // more than an unattacked run writes (about 24 KiB)
constexpr int kGarbage = 20000;
constexpr int kOversized = 20;
constexpr size_t kOversizedBytes = size_t(64) << 20;  // over both planes' frame limits (16 MiB, 4 MiB)
constexpr int kUnfinishedFrames = 32;
constexpr size_t kUnfinishedFrameBytes = size_t(4) << 20;  // 32 x 4 MiB = 128 MiB, over kMaxGrowthKiB

std::string launch_command(const std::string& run_dir) {
  return pshard_bin() + " launch --servers 1 --workers 1 --timeout 240 --config " + source_dir() +
         "/configs/linreg_sgd.toml --set train.epochs=500 --run-dir " + run_dir;
}

// "VmRSS" or "VmHWM" of a process in KiB; -1 when it is gone.
int64_t status_kib(int64_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  }
  return -1;
}

// The pid of the `pshard coordinator` whose command line mentions `run_dir`.
int64_t coordinator_pid(const std::string& run_dir) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = read_file(e.path().string() + "/cmdline");
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find(" coordinator ") != std::string::npos && cmd.find(run_dir) != std::string::npos) {
      return std::stoll(name);
    }
  }
  return -1;
}

// PSHARD_JOB_TOKEN from a process's environment (the job's processes are ours).
std::string job_token_of(int64_t pid) {
  const std::string env = read_file("/proc/" + std::to_string(pid) + "/environ");
  const std::string key = "PSHARD_JOB_TOKEN=";
  for (size_t at = 0; at < env.size();) {
    const size_t end = env.find('\0', at);
    const std::string var = env.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (var.rfind(key, 0) == 0) return var.substr(key.size());
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return "";
}

// A peer without the job's token sends frames marked "more to come" and never the last one. Before peers
// authenticated in the handshake, the target queued every frame (libzmq keeps a message's frames until its last
// arrives): 128 MiB here. Now the handshake fails and nothing is read.
void unfinished_message(zmq::context_t& ctx, const std::string& endpoint, const std::string& token) {
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::sndhwm, 0);
  transport::apply_client_auth(s, {}, token);
  s.connect(endpoint);
  const std::string frame(kUnfinishedFrameBytes, '\x55');
  // dontwait: once the handshake failed the socket may have no peer left to queue for, and a send would block.
  for (int i = 0; i < kUnfinishedFrames; ++i) {
    if (!s.send(zmq::buffer(frame), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) break;
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));  // time for the target to read them, were it to
}

// Garbage from a peer of the job (it has the token) that never reads its replies, then oversized frames, each on a
// fresh connection that the target drops (we wait for the disconnect); and unfinished messages from peers without
// the token (none, and another job's).
void flood(const std::string& endpoint, uint32_t seed, const std::string& token) {
  zmq::context_t ctx;
  {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvhwm, 1);
    s.set(zmq::sockopt::rcvbuf, 4096);
    s.set(zmq::sockopt::sndhwm, 0);
    transport::apply_client_auth(s, {}, token);
    s.connect(endpoint);
    std::mt19937 rng(seed);
    for (int i = 0; i < kGarbage; ++i) {
      std::string g(rng() % 256, '\0');
      for (char& c : g) c = static_cast<char>(rng());
      s.send(zmq::buffer(g), zmq::send_flags::none);
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));  // let the target read them before we leave
  }
  const std::string big(kOversizedBytes, '\x7f');
  for (int i = 0; i < kOversized; ++i) {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::reconnect_ivl, 10000);
    transport::apply_client_auth(s, {}, token);
    const std::string ep = "inproc://flood-monitor-" + std::to_string(i);
    if (zmq_socket_monitor(s.handle(), ep.c_str(), ZMQ_EVENT_DISCONNECTED) != 0) return;
    zmq::socket_t mon(ctx, zmq::socket_type::pair);
    mon.set(zmq::sockopt::rcvtimeo, 5000);
    mon.connect(ep);
    s.connect(endpoint);
    s.send(zmq::buffer(big), zmq::send_flags::none);
    zmq::message_t event;
    (void)mon.recv(event);
  }
  unfinished_message(ctx, endpoint, "");
  unfinished_message(ctx, endpoint, "another-job");
}

std::string run_unattacked(const std::string& dir) {
  std::filesystem::create_directories(dir);
  const int rc = pshard::testing::run_with_timeout(launch_command(dir + "/run"), 240, dir + "/log");
  EXPECT_EQ(rc, 0) << read_file(dir + "/log");
  return read_file(dir + "/run/model.bin");
}

TEST(Flood, GarbageAndOversizedFramesLeaveMemoryLogAndModelBounded) {
  const std::string dir = fresh_dir("flood");
  const std::string reference = run_unattacked(dir + "/plain");
  ASSERT_FALSE(reference.empty());

  const std::string run = dir + "/attacked/run";
  std::filesystem::create_directories(dir + "/attacked");
  BackgroundJob job(launch_command(run), dir + "/attacked/log");
  ASSERT_TRUE(job.started());
  // Once the rendezvous is complete (cluster.json), training runs: find the server and the coordinator.
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (!std::filesystem::exists(run + "/cluster.json") && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(std::filesystem::exists(run + "/cluster.json")) << read_file(dir + "/attacked/log");
  Json map = Json::parse(read_file(run + "/cluster.json"), run + "/cluster.json");
  int64_t server_pid = -1;
  std::string server_ep;
  for (const Json& n : map.at("nodes").elements()) {
    if (n.at("role").as_string() == "server") {
      server_pid = n.at("pid").as_int();
      server_ep = n.at("endpoint").as_string();
    }
  }
  const std::string log = read_file(dir + "/attacked/log");
  const size_t at = log.find("workers at tcp://");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string coord_ep = log.substr(at + 11, log.find_first_of(" \n", at + 11) - (at + 11));
  const int64_t coord_pid = coordinator_pid(run);
  ASSERT_GT(server_pid, 0);
  ASSERT_GT(coord_pid, 0) << "no coordinator process for " << run;
  const int64_t server_before = status_kib(server_pid, "VmRSS");
  const int64_t coord_before = status_kib(coord_pid, "VmRSS");

  const auto started = Clock::now();
  const std::string token = job_token_of(server_pid);
  ASSERT_FALSE(token.empty()) << "no PSHARD_JOB_TOKEN in the server's environment";
  // Meanwhile a handshake that stops inside its first frame (announced at 4 MiB, 1 KiB of it sent: under what
  // HandshakeGuard closes at once) is dropped after the handshake timeout.
  double dropped_after = -1;
  std::thread c([&] { dropped_after = pshard::testing::stalled_handshake(server_ep, size_t(4) << 20, 1024); });
  std::thread a([&] { flood(server_ep, 1, token); });
  std::thread b([&] { flood(coord_ep, 2, token); });
  a.join();
  b.join();
  c.join();
  const double limit_s = std::chrono::duration<double>(transport::kHandshakeTimeout).count();
  EXPECT_GT(dropped_after, 0.0) << "the server kept a stalled handshake open for 30 s (or it refused every connect "
                                   "for 10 s)";
  EXPECT_LT(dropped_after, limit_s + 5.0);
  const double flood_s = std::chrono::duration<double>(Clock::now() - started).count();
  const int64_t server_peak = status_kib(server_pid, "VmHWM");
  const int64_t coord_peak = status_kib(coord_pid, "VmHWM");
  ASSERT_GT(server_peak, 0) << "the job ended before the flood did (" << flood_s << " s)";
  ASSERT_GT(coord_peak, 0) << "the job ended before the flood did (" << flood_s << " s)";

  std::optional<int> rc = job.wait(std::chrono::seconds(240));
  ASSERT_TRUE(rc.has_value()) << read_file(dir + "/attacked/log");
  EXPECT_EQ(*rc, 0) << read_file(dir + "/attacked/log");
  const std::string attacked_log = read_file(dir + "/attacked/log");
  const size_t log_bytes = attacked_log.size();
  size_t refusal_lines = 0;
  for (size_t p = attacked_log.find("refused"); p != std::string::npos; p = attacked_log.find("refused", p + 1)) {
    ++refusal_lines;
  }
  std::printf(
      "flood of %.1f s: server RSS %lld KiB -> peak %lld KiB, coordinator RSS %lld KiB -> peak %lld KiB, "
      "log %zu bytes (%zu refusal lines)\n",
      flood_s, static_cast<long long>(server_before), static_cast<long long>(server_peak),
      static_cast<long long>(coord_before), static_cast<long long>(coord_peak), log_bytes, refusal_lines);
  EXPECT_LT(flood_s, 40.0);
  std::printf("a stalled handshake was dropped after %.1f s\n", dropped_after);
  EXPECT_LT(server_peak - server_before, kMaxGrowthKiB);
  EXPECT_LT(coord_peak - coord_before, kMaxGrowthKiB);
  EXPECT_LT(log_bytes, read_file(dir + "/plain/log").size() + kMaxLogBytes) << attacked_log;
  // The garbage reached both (one line each at least), and was summarised rather than logged line by line.
  EXPECT_NE(attacked_log.find("[server 0] "), std::string::npos);
  EXPECT_NE(attacked_log.find("server 0: refused"), std::string::npos) << attacked_log;
  EXPECT_NE(attacked_log.find("coordinator: control message from an unregistered peer"), std::string::npos)
      << attacked_log;
  // The peers without the token were refused in the handshake, each kind once or twice.
  // (The peer without a token: refused for its mechanism, or, when it closed first, for the broken handshake.)
  EXPECT_NE(attacked_log.find("server 0: refused a connection on"), std::string::npos) << attacked_log;
  EXPECT_NE(attacked_log.find("its job token is not this job's"), std::string::npos) << attacked_log;
  EXPECT_LT(refusal_lines, 50u) << attacked_log;
  EXPECT_TRUE(read_file(run + "/model.bin") == reference) << "the attacked run's model differs";
  pshard::testing::remove_dir_if_passed(dir);
}

}  // namespace
