// security.curve end to end: peers without the job's keys reach neither coordinator nor server (even with the
// job token), a `pshard launch` job trains with CurveZMQ, and launch refuses a key file others can read.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>
#include <zmq.hpp>

#include "common/control/cluster_client.h"
#include "common/control/control_codec.h"
#include "common/control/coordinator.h"
#include "common/error.h"
#include "common/protocol/codec.h"
#include "common/transport/curve.h"
#include "common/transport/frames.h"
#include "common/util/child_process.h"
#include "launcher/local_job.h"
#include "optim/optimizer.h"
#include "server/kv/kv_server.h"
#include "tests/support/run_helpers.h"
#include "worker/client/kv_client.h"

namespace pshard {
namespace {

using pshard::testing::fresh_dir;
using pshard::testing::pshard_bin;
using pshard::testing::read_file;
using pshard::testing::run_with_timeout;
using pshard::testing::source_dir;
using std::chrono::milliseconds;
using transport::CurveKeys;

const std::string kToken = "curve-it-token";

// A raw DEALER (keys: empty = plaintext) that sends one multipart message and waits for any reply.
bool gets_reply(const std::string& endpoint, const CurveKeys& keys, std::vector<zmq::message_t> frames,
                milliseconds wait) {
  zmq::context_t ctx(1);
  zmq::socket_t d(ctx, zmq::socket_type::dealer);
  d.set(zmq::sockopt::linger, 0);
  transport::apply_curve_client(d, keys);
  d.connect(endpoint);
  transport::send_frames(d, frames);
  zmq::pollitem_t item{d.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, wait);
  zmq::message_t reply;
  return static_cast<bool>(d.recv(reply, zmq::recv_flags::dontwait));
}

// The keys of a stranger: its own client keypair, but it knows the job's server public key.
CurveKeys stranger_of(const CurveKeys& job) {
  CurveKeys k = transport::generate_curve_keys();
  k.server_public = job.server_public;
  return k;
}

TEST(CurveJob, PeersWithoutTheKeysGetNoReplyAndChangeNothing) {
  if (!transport::curve_available()) GTEST_SKIP() << "libzmq without CURVE";
  const std::string dir = fresh_dir("curve-raw");
  const CurveKeys job = transport::ensure_curve_keys(dir + "/keys");

  const SliceLayout layout({{"w", 8}}, 64, 1);
  KvServerOptions so;
  so.num_servers = 1;
  so.num_workers = 1;
  so.job_token = kToken;
  so.curve = job;
  so.slice_bytes = 64;
  so.optimizer = optim::make_optimizer(optim::OptimizerParams{});  // sgd
  so.lr_at = [](int64_t) { return 1.0f; };
  KvServer server(so);

  KvClientOptions ko;
  ko.servers = {server.endpoint()};
  ko.tensors = layout.tensors();
  ko.slice_bytes = 64;
  ko.job_token = kToken;
  ko.curve = job;
  ko.request_timeout = milliseconds(10000);
  KvClient kv(ko);
  const std::vector<float> w0 = {1, 2, 3, 4, 5, 6, 7, 8};
  kv.wait(kv.init("w", w0.data(), w0.size()));
  std::vector<float> w(8);
  kv.wait(kv.zpull("w", w.data(), w.size(), 0));
  ASSERT_EQ(w, w0);
  const uint64_t requests_before = server.stats().requests;

  // A push of step 0 with the right token: what an attacker who learnt the token would send.
  const std::vector<float> grad(8, 100.0f);
  auto push = [&] {
    protocol::Message m;
    m.type = protocol::MessageType::PUSH;
    m.request_id = 77;
    m.job_token = kToken;
    m.sender_role = protocol::Role::WORKER;
    m.sender_rank = 0;
    m.step = 0;
    m.layout_fingerprint = layout.fingerprint();
    const SliceInfo& s = layout.slice(0);
    m.keys.push_back({s.tensor, s.slice, s.offset, s.length, protocol::DType::FLOAT32});
    std::vector<zmq::message_t> frames;
    frames.push_back(transport::copy_frame(protocol::encode_header(m)));
    frames.emplace_back(grad.data(), grad.size() * sizeof(float));
    return frames;
  };
  EXPECT_FALSE(gets_reply(server.endpoint(), CurveKeys{}, push(), milliseconds(1000))) << "plaintext peer";
  EXPECT_FALSE(gets_reply(server.endpoint(), stranger_of(job), push(), milliseconds(1000))) << "wrong keypair";
  EXPECT_EQ(server.stats().requests, requests_before) << "a message of a peer without the keys reached the server";
  kv.wait(kv.zpull("w", w.data(), w.size(), 0));
  EXPECT_EQ(w, w0) << "the weights changed";

  // The same push with the job's keys is answered and applied (so the refusals above were the keys').
  EXPECT_TRUE(gets_reply(server.endpoint(), job, push(), milliseconds(5000)));
  kv.wait(kv.zpull("w", w.data(), w.size(), 1));
  EXPECT_FLOAT_EQ(w[0], w0[0] - 100.0f);

  // The coordinator: a registration with another token is refused with a reply, but only to a
  // peer that completed the CurveZMQ handshake.
  Coordinator::Options co;
  co.num_servers = 1;
  co.num_workers = 1;
  co.job_token = kToken;
  co.curve = job;
  co.rendezvous_timeout = milliseconds(20000);
  Coordinator coord(co);
  coord.start();
  auto reg = [] {
    capnp::MallocMessageBuilder b;
    auto r = b.initRoot<control::ControlMessage>().initRegister();
    r.setRole(control_codec::to_wire(NodeRole::kWorker));
    r.setRequestedRank(-1);
    r.setHost("intruder");
    r.setPid(4242);
    r.setJobToken("another-token");
    std::vector<zmq::message_t> frames;
    frames.push_back(control_codec::encode(b));
    return frames;
  };
  EXPECT_FALSE(gets_reply(coord.endpoint(), CurveKeys{}, reg(), milliseconds(1000))) << "plaintext peer";
  EXPECT_FALSE(gets_reply(coord.endpoint(), stranger_of(job), reg(), milliseconds(1000))) << "wrong keypair";
  EXPECT_TRUE(gets_reply(coord.endpoint(), job, reg(), milliseconds(5000))) << "keyed peer: registerRefused";

  // Real nodes: one with a stranger's keys cannot register (refused in the handshake, and told so); the job's can.
  auto node = [&](NodeRole role, const CurveKeys& keys, milliseconds timeout) {
    ClusterClient::Options o;
    o.coordinator = coord.endpoint();
    o.role = role;
    o.endpoint = role == NodeRole::kServer ? server.endpoint() : "";
    o.job_token = kToken;
    o.curve = keys;
    o.heartbeat_interval = milliseconds(100);
    o.rendezvous_timeout = timeout;
    return std::make_unique<ClusterClient>(o);
  };
  auto server_node = std::async(std::launch::async, [&] { return node(NodeRole::kServer, job, milliseconds(20000)); });
  try {
    node(NodeRole::kWorker, stranger_of(job), milliseconds(1500));
    ADD_FAILURE() << "a worker with a stranger's keys joined the job";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("refused this process's CurveZMQ client key"), std::string::npos) << e.what();
  }
  EXPECT_EQ(coord.map().servers.size() + coord.map().workers.size(), 0u);
  auto worker_node = node(NodeRole::kWorker, job, milliseconds(20000));
  auto s = server_node.get();
  EXPECT_EQ(worker_node->map().num_workers, 1u);
  EXPECT_EQ(worker_node->map().servers.at(0).endpoint, server.endpoint());
  worker_node->leave(0);
  s->leave(0);
  pshard::testing::remove_dir_if_passed(dir);
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

std::string launch(const std::string& run_dir) {
  return pshard_bin() + " launch --servers 2 --workers 2 --timeout 150 --config " + source_dir() +
         "/configs/linreg_sgd.toml --set security.curve=true --set train.epochs=2 --set data.train_size=2048"
         " --set data.test_size=256 --set train.threads=1 --run-dir " +
         run_dir;
}

TEST(CurveJob, LaunchTrainsWithCurveZmqAndA0600KeyFile) {
  if (!transport::curve_available()) GTEST_SKIP() << "libzmq without CURVE";
  const std::string dir = fresh_dir("curve-launch");
  const std::string log = dir + "/log";
  const int rc = run_with_timeout(launch(dir + "/run"), 180, log);
  ASSERT_EQ(rc, 0) << read_file(log);
  const std::string text = read_file(log);
  EXPECT_NE(text.find("security: CurveZMQ"), std::string::npos) << text;
  EXPECT_EQ(text.find(": refused a "), std::string::npos) << text;  // no node was turned away
  const Json summary = pshard::testing::read_summary(dir + "/run");
  EXPECT_EQ(summary.at("epochs").as_int(), 2) << summary.dump();
  EXPECT_EQ(mode_of(dir + "/run/keys"), 0700u);
  EXPECT_EQ(mode_of(dir + "/run/keys/curve.keys"), 0600u);
  EXPECT_NO_THROW(transport::read_curve_keys(dir + "/run/keys"));
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(CurveJob, LaunchRefusesAKeyFileOthersCanRead) {
  if (!transport::curve_available()) GTEST_SKIP() << "libzmq without CURVE";
  const std::string dir = fresh_dir("curve-mode");
  transport::ensure_curve_keys(dir + "/run/keys");
  const std::string file = dir + "/run/keys/curve.keys";
  ASSERT_EQ(::chmod(file.c_str(), 0644), 0);
  const std::string log = dir + "/log";
  const int rc = run_with_timeout(launch(dir + "/run"), 60, log);
  const std::string text = read_file(log);
  EXPECT_NE(rc, 0) << text;
  EXPECT_NE(text.find(file + " has mode 0644"), std::string::npos) << text;
  EXPECT_EQ(text.find("[worker"), std::string::npos) << "no process should start\n" << text;
  pshard::testing::remove_dir_if_passed(dir);
}

// An srun step simulated on this machine: 3 tasks of `pshard slurm` on one "node" (task 0: coordinator and
// server, tasks 1-2: workers). The workers start first and wait for the key file task 0 creates.
TEST(CurveJob, SlurmTasksWaitForTheKeyFileTask0Creates) {
  if (!transport::curve_available()) GTEST_SKIP() << "libzmq without CURVE";
  const std::string dir = fresh_dir("curve-slurm");
  const int port = pick_free_ports(1).at(0);
  auto task = [&](int id) {
    const std::string env =
        "env PSHARD_JOB_TOKEN=slurm-curve SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_NTASKS=3 "
        "SLURM_NODEID=0 SLURM_JOB_NODELIST=node1 SLURM_TASKS_PER_NODE=3 SLURM_PROCID=" +
        std::to_string(id) + " SLURM_LOCALID=" + std::to_string(id) + " ";
    const std::string cmd = env + pshard_bin() + " slurm --config " + source_dir() +
                            "/configs/linreg_sgd.toml --set security.curve=true --set train.epochs=1"
                            " --set data.train_size=1024 --set data.test_size=128 --set train.threads=1"
                            " --iface lo --coordinator-host 127.0.0.1 --port " +
                            std::to_string(port) + " --run-dir " + dir + "/run";
    return run_with_timeout(cmd, 120, dir + "/task" + std::to_string(id) + ".log");
  };
  auto w1 = std::async(std::launch::async, task, 1);
  auto w2 = std::async(std::launch::async, task, 2);
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_FALSE(std::filesystem::exists(dir + "/run/keys/curve.keys"));
  const int rc0 = task(0);
  const int rc1 = w1.get(), rc2 = w2.get();
  EXPECT_EQ(rc0, 0) << read_file(dir + "/task0.log");
  EXPECT_EQ(rc1, 0) << read_file(dir + "/task1.log");
  EXPECT_EQ(rc2, 0) << read_file(dir + "/task2.log");
  EXPECT_EQ(mode_of(dir + "/run/keys/curve.keys"), 0600u);
  EXPECT_EQ(pshard::testing::read_summary(dir + "/run").at("epochs").as_int(), 1);
  pshard::testing::remove_dir_if_passed(dir);
}

}  // namespace
}  // namespace pshard
