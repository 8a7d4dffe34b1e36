// CurveZMQ keys and sockets: the 0600 key file, refusals of unsafe or broken files, and a CURVE server that
// answers the job's clients only and whose traffic is not plaintext on the wire.
#include "common/transport/curve.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/config/config.h"
#include "common/error.h"
#include "common/transport/handshake_guard.h"
#include "common/transport/peer_auth.h"
#include "tests/support/error_of.h"
#include "tests/support/raw_handshake.h"

namespace pshard::transport {
namespace {

using std::chrono::milliseconds;

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("pshard-curve-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

using pshard::testing::error_of;

TEST(CurveKeys, EnsureCreatesA0600FileInA0700DirectoryAndReusesIt) {
  if (!curve_available()) GTEST_SKIP() << "libzmq without CURVE";
  TempDir tmp;
  const std::string dir = tmp / "run/keys";
  const CurveKeys k = ensure_curve_keys(dir);
  EXPECT_TRUE(k.enabled());
  EXPECT_EQ(k.server_public.size(), 40u);
  EXPECT_EQ(k.client_secret.size(), 40u);
  EXPECT_NE(k.server_public, k.client_public);
  EXPECT_EQ(mode_of(curve_key_file(dir)), 0600u);
  EXPECT_EQ(mode_of(dir), 0700u);
  const CurveKeys again = ensure_curve_keys(dir);  // the existing file is reused, not replaced
  EXPECT_EQ(again.server_secret, k.server_secret);
  EXPECT_EQ(again.client_secret, k.client_secret);
  const CurveKeys other = generate_curve_keys();
  EXPECT_NE(other.server_secret, k.server_secret);
}

TEST(CurveKeys, AWorldWritableKeyDirectoryIsRefusedNamingItAndItsMode) {
  if (!curve_available()) GTEST_SKIP() << "libzmq without CURVE";
  TempDir tmp;
  const std::string dir = tmp / "keys";
  write_curve_keys(dir, generate_curve_keys());
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  const std::string want = "CurveZMQ key directory " + dir +
                           " has mode 0777: anyone can replace the key file in it; refusing to use it (chmod 700 " +
                           dir + ")";
  EXPECT_EQ(error_of([&] { read_curve_keys(dir); }), want);
  EXPECT_EQ(error_of([&] { ensure_curve_keys(dir); }), want);
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  EXPECT_EQ(error_of([&] { read_curve_keys(dir); }), "");
}

TEST(CurveKeys, AKeyFileOthersCanReadIsRefusedNamingFileAndMode) {
  if (!curve_available()) GTEST_SKIP() << "libzmq without CURVE";
  TempDir tmp;
  const std::string dir = tmp / "keys";
  write_curve_keys(dir, generate_curve_keys());
  const std::string file = curve_key_file(dir);
  ASSERT_EQ(::chmod(file.c_str(), 0640), 0);
  std::string msg = error_of([&] { read_curve_keys(dir); });
  EXPECT_NE(msg.find(file), std::string::npos) << msg;
  EXPECT_NE(msg.find("0640"), std::string::npos) << msg;
  msg = error_of([&] { ensure_curve_keys(dir); });  // launch does not silently replace it either
  EXPECT_NE(msg.find("0640"), std::string::npos) << msg;
  ASSERT_EQ(::chmod(file.c_str(), 0604), 0);
  msg = error_of([&] { read_curve_keys(dir); });
  EXPECT_NE(msg.find("0604"), std::string::npos) << msg;
  ASSERT_EQ(::chmod(file.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { read_curve_keys(dir); }), "");
}

TEST(CurveKeys, MissingOrBrokenKeyFilesAreErrors) {
  if (!curve_available()) GTEST_SKIP() << "libzmq without CURVE";
  TempDir tmp;
  const std::string dir = tmp / "keys";
  std::string msg = error_of([&] { read_curve_keys(dir); });
  EXPECT_NE(msg.find(curve_key_file(dir)), std::string::npos) << msg;

  const CurveKeys k = generate_curve_keys();
  const CurveKeys other = generate_curve_keys();
  write_curve_keys(dir, k);
  auto rewrite = [&](const std::string& text) {
    std::ofstream(curve_key_file(dir)) << text;  // existing file: keeps mode 0600
  };
  rewrite("server_public = " + k.server_public + "\nserver_secret = " + k.server_secret +
          "\nclient_public = " + k.client_public + "\n");
  msg = error_of([&] { read_curve_keys(dir); });
  EXPECT_NE(msg.find("client_secret"), std::string::npos) << msg;
  rewrite("server_public = " + other.server_public + "\nserver_secret = " + k.server_secret +
          "\nclient_public = " + k.client_public + "\nclient_secret = " + k.client_secret + "\n");
  msg = error_of([&] { read_curve_keys(dir); });
  EXPECT_NE(msg.find("does not match"), std::string::npos) << msg;
  rewrite("server_public = " + k.server_public.substr(0, 39) + "\n");
  msg = error_of([&] { read_curve_keys(dir); });
  EXPECT_NE(msg.find("server_public"), std::string::npos) << msg;
}

TEST(CurveKeys, ConfigDecidesWhetherKeysAreNeededAndWhere) {
  Config off = Config::defaults();
  EXPECT_FALSE(job_curve_keys(off, "").enabled());
  EXPECT_EQ(curve_key_dir(off, "", "/tmp/r1"), "/tmp/r1/keys");
  EXPECT_EQ(curve_key_dir(off, "/tmp/k", "/tmp/r1"), "/tmp/k");
  EXPECT_EQ(curve_key_dir(off, "", ""), "");
  Config on = Config::defaults();
  on.set("security.curve=true");
  on.set("security.key_dir=/tmp/shared-keys");
  EXPECT_EQ(curve_key_dir(on, "", "/tmp/r1"), "/tmp/shared-keys");
  EXPECT_EQ(curve_key_dir(on, "/tmp/k", "/tmp/r1"), "/tmp/k");
  if (!curve_available()) GTEST_SKIP() << "libzmq without CURVE";
  const std::string msg = error_of([&] { job_curve_keys(on, ""); });
  EXPECT_NE(msg.find("--key-dir"), std::string::npos) << msg;
}

// A ROUTER that echoes every message; `keys` empty: plaintext.
class EchoServer {
 public:
  // `max_frame_bytes`: the router's ZMQ_MAXMSGSIZE (a server's data-plane limit is 16 MiB); 0: none.
  explicit EchoServer(const CurveKeys& keys, const std::string& token = "", int64_t max_frame_bytes = 0)
      : router_(ctx_, zmq::socket_type::router) {
    router_.set(zmq::sockopt::linger, 0);
    if (max_frame_bytes > 0) router_.set(zmq::sockopt::maxmsgsize, max_frame_bytes);
    curve_ = std::make_unique<PeerAuthenticator>(ctx_, router_, keys, token, "echo server");
    router_.bind("tcp://127.0.0.1:*");
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] {
      while (!stop_) {
        zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
        zmq::poll(&item, 1, milliseconds(50));
        zmq::message_t id, body;
        while (router_.recv(id, zmq::recv_flags::dontwait)) {
          (void)router_.recv(body, zmq::recv_flags::none);
          ++received_;
          router_.send(id, zmq::send_flags::sndmore);
          router_.send(body, zmq::send_flags::none);
        }
      }
    });
  }
  ~EchoServer() {
    stop_ = true;
    thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }
  int received() const { return received_; }
  const PeerAuthenticator& curve() const { return *curve_; }

 private:
  zmq::context_t ctx_{1};
  zmq::socket_t router_;
  std::unique_ptr<PeerAuthenticator> curve_;
  std::string endpoint_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> received_{0};
};

// Sends "ping" from a DEALER set up by `setup` and waits up to `wait` for the echo.
bool echoed(const std::string& endpoint, const std::function<void(zmq::socket_t&)>& setup, milliseconds wait) {
  zmq::context_t ctx(1);
  zmq::socket_t d(ctx, zmq::socket_type::dealer);
  d.set(zmq::sockopt::linger, 0);
  setup(d);
  d.connect(endpoint);
  d.send(zmq::str_buffer("ping"), zmq::send_flags::none);
  zmq::pollitem_t item{d.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, wait);
  zmq::message_t reply;
  return d.recv(reply, zmq::recv_flags::dontwait) && reply.to_string() == "ping";
}

template <typename F>
bool eventually(F f, milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!f()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

TEST(PeerAuthenticator, PlaintextJobsAdmitOnlyPeersWithTheJobToken) {
  EchoServer server(CurveKeys{}, "job-token");
  EXPECT_EQ(server.curve().mechanism(), Mechanism::kPlain);

  EXPECT_TRUE(echoed(
      server.endpoint(), [](zmq::socket_t& s) { apply_client_auth(s, {}, "job-token"); }, milliseconds(5000)));
  EXPECT_EQ(server.received(), 1);
  EXPECT_GE(server.curve().accepted(), 1u);

  // No token (the NULL mechanism): the greeting already fails, nothing reaches the ROUTER.
  EXPECT_FALSE(echoed(
      server.endpoint(), [](zmq::socket_t&) {}, milliseconds(700)));
  EXPECT_TRUE(eventually([&] { return server.curve().failed_handshakes() >= 1; }, milliseconds(2000)));

  // Another job's token: ZAP refuses it.
  EXPECT_FALSE(echoed(
      server.endpoint(), [](zmq::socket_t& s) { apply_client_auth(s, {}, "job-tokem"); }, milliseconds(700)));
  EXPECT_TRUE(eventually([&] { return server.curve().refused() >= 1; }, milliseconds(2000)));
  EXPECT_EQ(server.received(), 1);

  // A token PLAIN cannot carry is an error at once, not a silent refusal later.
  zmq::context_t ctx(1);
  zmq::socket_t d(ctx, zmq::socket_type::dealer);
  try {
    apply_client_auth(d, {}, std::string(256, 't'));
    ADD_FAILURE() << "a 256-byte token was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("256 bytes"), std::string::npos) << e.what();
  }
}

// libzmq queues the frames of a message until its last one arrives. A peer without the token must not be able to
// make the receiver hold frames marked "more to come": it never gets past the handshake, so none of them is read.
// The refused client learns why from its HandshakeWatch.
TEST(PeerAuthenticator, APeerWithoutTheTokenSendsNoFrameAndIsToldWhy) {
  EchoServer server(CurveKeys{}, "job-token");
  for (const std::string token : {"", "another-job"}) {
    zmq::context_t ctx(1);
    zmq::socket_t d(ctx, zmq::socket_type::dealer);
    d.set(zmq::sockopt::linger, 0);
    apply_client_auth(d, {}, token);
    HandshakeWatch watch(ctx, d, job_mechanism({}, token));
    d.connect(server.endpoint());
    const std::string frame(size_t(1) << 20, 'm');
    for (int i = 0; i < 16; ++i) d.send(zmq::buffer(frame), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    std::string why;
    EXPECT_TRUE(eventually(
        [&] {
          why = watch.refusal();
          return !why.empty();
        },
        milliseconds(5000)))
        << "token '" << token << "'";
    if (token.empty()) {
      EXPECT_NE(why.find("another ZeroMQ security mechanism than NULL"), std::string::npos) << why;
    } else {
      EXPECT_NE(why.find("refused this process's job token"), std::string::npos) << why;
      EXPECT_NE(why.find("PSHARD_JOB_TOKEN"), std::string::npos) << why;
    }
  }
  EXPECT_EQ(server.received(), 0);
  // The job's own peers are still served.
  EXPECT_TRUE(echoed(
      server.endpoint(), [](zmq::socket_t& s) { apply_client_auth(s, {}, "job-token"); }, milliseconds(5000)));
}

TEST(PeerAuthenticator, NoTokenAndNoKeysMeansNoAuthentication) {
  EchoServer server(CurveKeys{}, "");
  EXPECT_EQ(server.curve().mechanism(), Mechanism::kNull);
  EXPECT_TRUE(echoed(
      server.endpoint(), [](zmq::socket_t&) {}, milliseconds(5000)));
  EXPECT_EQ(server.curve().accepted(), 0u);
}

TEST(PeerAuthenticator, OnlyClientsWithTheJobsKeysGetThrough) {
  if (!curve_available()) GTEST_SKIP() << "libzmq without CURVE";
  const CurveKeys job = generate_curve_keys();
  EchoServer server(job);

  EXPECT_TRUE(echoed(
      server.endpoint(), [&](zmq::socket_t& s) { apply_curve_client(s, job); }, milliseconds(5000)));
  EXPECT_EQ(server.received(), 1);
  EXPECT_GE(server.curve().accepted(), 1u);

  // No keys at all (plaintext): the handshake fails, the message never reaches the ROUTER.
  EXPECT_FALSE(echoed(
      server.endpoint(), [](zmq::socket_t&) {}, milliseconds(700)));
  EXPECT_TRUE(eventually([&] { return server.curve().failed_handshakes() >= 1; }, milliseconds(2000)));

  // Another job's keys, but the right server public key: ZAP refuses the client key.
  const CurveKeys stranger = generate_curve_keys();
  CurveKeys wrong_client = stranger;
  wrong_client.server_public = job.server_public;
  EXPECT_FALSE(echoed(
      server.endpoint(), [&](zmq::socket_t& s) { apply_curve_client(s, wrong_client); }, milliseconds(700)));
  EXPECT_TRUE(eventually([&] { return server.curve().refused() >= 1; }, milliseconds(2000)));

  // The job's client keys but another server key: the server cannot decrypt the handshake.
  CurveKeys wrong_server = job;
  wrong_server.server_public = stranger.server_public;
  EXPECT_FALSE(echoed(
      server.endpoint(), [&](zmq::socket_t& s) { apply_curve_client(s, wrong_server); }, milliseconds(700)));
  EXPECT_EQ(server.received(), 1);  // none of the three got a message through

  // And the job's own client still does.
  EXPECT_TRUE(echoed(
      server.endpoint(), [&](zmq::socket_t& s) { apply_curve_client(s, job); }, milliseconds(5000)));
  EXPECT_EQ(server.received(), 2);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kInstrumented = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kInstrumented = true;
#else
constexpr bool kInstrumented = false;
#endif
#else
constexpr bool kInstrumented = false;
#endif

// "VmRSS" or "VmHWM" of this process in KiB.
int64_t own_status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  }
  return -1;
}

// Before its handshake has passed, a connection may make the process hold one frame of up to the socket's frame
// limit (libzmq allocates what the frame announces). 20 connections that each announce 15 MiB and send it, as fast
// as loopback carries it, are closed long before the handshake timeout, and the process grows by far less than
// their 300 MiB; the job's own clients still get through.
TEST(PeerAuthenticator, ConnectionsSendingMoreThanAHandshakeBeforeItPassedAreClosed) {
  constexpr int64_t kServerFrameLimit = int64_t(16) << 20;
  EchoServer server(CurveKeys{}, "job-token", kServerFrameLimit);
  constexpr int kConnections = 20;
  constexpr size_t kFrame = size_t(15) << 20;
  std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM starts again from VmRSS
  const int64_t before = own_status_kib("VmRSS");
  std::vector<double> closed_after(kConnections, -1);
  std::vector<std::thread> peers;
  for (int i = 0; i < kConnections; ++i) {
    peers.emplace_back(
        [&, i] { closed_after[i] = pshard::testing::stalled_handshake(server.endpoint(), kFrame, kFrame); });
  }
  for (auto& t : peers) t.join();
  const int64_t peak = own_status_kib("VmHWM");
  const double timeout_s = std::chrono::duration<double>(kHandshakeTimeout).count();
  for (int i = 0; i < kConnections; ++i) {
    EXPECT_GT(closed_after[i], 0.0) << "connection " << i << " was not closed within 30 s";
    EXPECT_LT(closed_after[i], timeout_s / 4) << "connection " << i << " was closed by the handshake timeout only";
  }
  EXPECT_TRUE(eventually([&] { return server.curve().closed_handshakes() >= kConnections; }, milliseconds(2000)))
      << server.curve().closed_handshakes();
  std::printf("%d connections announcing %zu MiB: closed after %.3f s at most; RSS %lld KiB -> peak %lld KiB\n",
              kConnections, kFrame >> 20, *std::max_element(closed_after.begin(), closed_after.end()),
              static_cast<long long>(before), static_cast<long long>(peak));
  // (A sanitizer's shadow memory and its slower guard thread make the figure meaningless there.)
  if (!kInstrumented) {
    EXPECT_LT(peak - before, int64_t(96) << 10) << "KiB grown by the stalled handshakes";
  }
  EXPECT_TRUE(echoed(
      server.endpoint(), [](zmq::socket_t& s) { apply_client_auth(s, {}, "job-token"); }, milliseconds(5000)));
}

// No more than HandshakeGuard::kMaxPending connections may be in their handshake at once: the oldest of a flood
// of connections that each send less than the byte limit are closed, and the job's own client, whose handshake
// passes in milliseconds, still gets through meanwhile.
TEST(PeerAuthenticator, TheOldestOfTooManyConnectionsInTheirHandshakeAreClosed) {
  EchoServer server(CurveKeys{}, "job-token", int64_t(16) << 20);
  constexpr size_t kOver = 24;
  const size_t connections = HandshakeGuard::kMaxPending + kOver;
  std::vector<double> closed_after(connections, -1);
  std::vector<std::thread> peers;
  // An order of arrival: each peer connects once the one before it has (threads started 1 ms apart do not keep
  // their order on a loaded machine); the next is woken through a condition variable (280 threads polling a counter
  // slowed an ASan build's arrivals past the server's 10 s handshake timeout, which then closed the oldest itself).
  // Every peer holds its connection until the last one connected, then waits 4 s for the server to close it.
  std::mutex mu;
  std::condition_variable next;
  size_t arrived = 0;
  const auto arriving = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return arrived < connections;
  };
  for (size_t i = 0; i < connections; ++i) {
    peers.emplace_back([&, i] {
      {
        std::unique_lock<std::mutex> lock(mu);
        next.wait_for(lock, std::chrono::seconds(10), [&] { return arrived >= i; });
      }
      const auto connected = [&] {
        {
          std::lock_guard<std::mutex> lock(mu);
          ++arrived;
        }
        next.notify_all();
      };
      closed_after[i] =
          pshard::testing::stalled_handshake(server.endpoint(), size_t(1) << 20, 1024, 4.0, connected, arriving);
    });
  }
  // The job's own client, once the crowd is in (its connection is one more in a handshake: it may push one more of
  // the oldest out).
  EXPECT_TRUE(eventually([&] { return !arriving(); }, milliseconds(30000)));
  EXPECT_TRUE(echoed(
      server.endpoint(), [](zmq::socket_t& s) { apply_client_auth(s, {}, "job-token"); }, milliseconds(2000)));
  for (auto& t : peers) t.join();
  size_t closed = 0, first_open = connections;
  for (size_t i = 0; i < connections; ++i) {
    if (closed_after[i] > 0) {
      ++closed;
    } else if (first_open == connections) {
      first_open = i;
    }
  }
  // kOver of them, and one more for the client's own connection while it was in its handshake; all from the first.
  EXPECT_GE(closed, kOver);
  EXPECT_LE(closed, kOver + 1);
  EXPECT_EQ(first_open, closed) << "closed connections are not the oldest";
  EXPECT_EQ(server.curve().closed_handshakes(), closed);
}

// A client's first messages are queued before its handshake and sent right after it passed: large ones (8 MiB,
// over the guard's 16 KiB) must not be taken for an oversized handshake, with PLAIN or CURVE.
TEST(PeerAuthenticator, LargeMessagesRightAfterTheHandshakeAreNotTakenForOne) {
  std::vector<std::pair<CurveKeys, std::string>> jobs = {{CurveKeys{}, "job-token"}};
  if (curve_available()) jobs.emplace_back(generate_curve_keys(), "");
  for (const auto& [keys, token] : jobs) {
    EchoServer server(keys, token, int64_t(16) << 20);
    for (int client = 0; client < 4; ++client) {
      zmq::context_t ctx(1);
      zmq::socket_t d(ctx, zmq::socket_type::dealer);
      d.set(zmq::sockopt::linger, 0);
      if (keys.enabled()) {
        apply_curve_client(d, keys);
      } else {
        apply_client_auth(d, {}, token);
      }
      d.connect(server.endpoint());
      const std::string big(size_t(8) << 20, static_cast<char>('a' + client));
      for (int m = 0; m < 3; ++m) d.send(zmq::buffer(big), zmq::send_flags::none);
      for (int m = 0; m < 3; ++m) {
        zmq::pollitem_t item{d.handle(), 0, ZMQ_POLLIN, 0};
        zmq::poll(&item, 1, milliseconds(10000));
        zmq::message_t reply;
        ASSERT_TRUE(d.recv(reply, zmq::recv_flags::dontwait)) << mechanism_name(server.curve().mechanism());
        EXPECT_EQ(reply.size(), big.size());
      }
    }
    EXPECT_EQ(server.curve().closed_handshakes(), 0u) << mechanism_name(server.curve().mechanism());
    EXPECT_EQ(server.received(), 12);
  }
}

// A TCP relay on 127.0.0.1 that records every byte the client sends.
class Tap {
 public:
  explicit Tap(int target_port) : target_port_(target_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_fd_, 1) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      throw Error("tap: cannot listen");
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~Tap() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
  }
  int port() const { return port_; }
  std::string captured() {
    std::lock_guard<std::mutex> lock(mu_);
    return captured_;
  }

 private:
  void run() {
    pollfd p{listen_fd_, POLLIN, 0};
    while (!stop_ && ::poll(&p, 1, 50) <= 0) {
    }
    if (stop_) return;
    const int client = ::accept(listen_fd_, nullptr, nullptr);
    const int server = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(target_port_));
    if (client < 0 || ::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
    char buf[65536];
    while (!stop_) {
      pollfd fds[] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(fds, 2, 50) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
        const ssize_t n = ::recv(fds[i].fd, buf, sizeof buf, 0);
        if (n <= 0) {
          stop_ = true;
          break;
        }
        if (i == 0) {
          std::lock_guard<std::mutex> lock(mu_);
          captured_.append(buf, static_cast<size_t>(n));
        }
        (void)::send(fds[1 - i].fd, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
      }
    }
    ::close(client);
    ::close(server);
  }

  int target_port_, port_ = 0, listen_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string captured_;
};

int port_of(const std::string& endpoint) { return std::stoi(endpoint.substr(endpoint.rfind(':') + 1)); }

// What a client's message looks like on the wire, through a Tap.
std::string wire_bytes(const CurveKeys& keys, const std::string& secret) {
  EchoServer server(keys);
  Tap tap(port_of(server.endpoint()));
  zmq::context_t ctx(1);
  zmq::socket_t d(ctx, zmq::socket_type::dealer);
  d.set(zmq::sockopt::linger, 0);
  apply_curve_client(d, keys);
  d.connect("tcp://127.0.0.1:" + std::to_string(tap.port()));
  d.send(zmq::buffer(secret), zmq::send_flags::none);
  zmq::pollitem_t item{d.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, milliseconds(5000));
  zmq::message_t reply;
  EXPECT_TRUE(d.recv(reply, zmq::recv_flags::dontwait));
  EXPECT_EQ(reply.to_string(), secret);
  return tap.captured();
}

TEST(PeerAuthenticator, MessagesAreNotPlaintextOnTheWire) {
  if (!curve_available()) GTEST_SKIP() << "libzmq without CURVE";
  const std::string secret = "gradient-bytes-0123456789-visible-to-a-sniffer";
  // Plaintext: the tap sees the message (so the check below can fail).
  EXPECT_NE(wire_bytes(CurveKeys{}, secret).find(secret), std::string::npos);
  const std::string curve = wire_bytes(generate_curve_keys(), secret);
  EXPECT_GT(curve.size(), secret.size());
  EXPECT_EQ(curve.find(secret), std::string::npos);
  EXPECT_EQ(curve.find("gradient"), std::string::npos);
}

}  // namespace
}  // namespace pshard::transport
