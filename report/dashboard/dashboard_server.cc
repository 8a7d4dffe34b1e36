#include "report/dashboard/dashboard_server.h"

#include <fcntl.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <optional>
#include <thread>

#include "common/error.h"

namespace pshard::report::dashboard {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// A browser keeps a connection open between polls; one that says nothing for this long is closed.
constexpr auto kIdle = std::chrono::seconds(30);
// Requests are GETs with a short query: anything longer is not the page's.
constexpr uint32_t kMaxRequestBytes = 16 * 1024;
// More open connections than any few browser tabs make: beyond it, new ones are closed at once.
constexpr int kMaxConnections = 64;

// One connection: read a request, answer it, until the peer closes, goes idle or asks to close.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, const Site& site, std::atomic<int>& open)
      : stream_(std::move(socket)), site_(site), open_(open) {
    ++open_;
  }
  ~Connection() { --open_; }

  void start() { read(); }

 private:
  void read() {
    parser_.emplace();
    parser_->header_limit(kMaxRequestBytes);
    parser_->body_limit(kMaxRequestBytes);
    stream_.expires_after(kIdle);
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->respond();
    });
  }

  void respond() {
    const http::request<http::string_body>& req = parser_->get();
    const Reply r = answer(std::string(req.method_string()), std::string(req.target()), site_);
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(r.status), req.version());
    res->set(http::field::server, "pshard dashboard");
    res->set(http::field::content_type, r.content_type);
    res->set(http::field::cache_control, "no-store");
    res->set("X-Content-Type-Options", "nosniff");
    for (const auto& [name, value] : r.headers) res->set(name, value);
    res->keep_alive(req.keep_alive());
    res->body() = r.body;
    res->prepare_payload();
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      if (ec || !res->keep_alive()) return self->close();
      self->read();
    });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  const Site& site_;
  std::atomic<int>& open_;
};

// The launch starts its job's processes while the page serves: they must not inherit its sockets (a child that
// outlived the launch would hold the port).
void close_on_exec(int fd) { ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC); }

}  // namespace

ListenAddress parse_listen_address(const std::string& text, const std::string& option) {
  const size_t colon = text.rfind(':');
  const std::string want = option + " takes ADDR:PORT (e.g. 127.0.0.1:8080; port 0: a free one), got '" + text + "'";
  if (colon == std::string::npos || colon == 0) throw Error(want);
  ListenAddress a;
  a.address = text.substr(0, colon);
  boost::system::error_code ec;
  (void)asio::ip::make_address(a.address, ec);
  if (ec) throw Error(option + ": '" + a.address + "' is not an IP address (" + want + ")");
  const std::string port = text.substr(colon + 1);
  size_t used = 0;
  long v = -1;
  try {
    v = std::stol(port, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != port.size() || v < 0 || v > 65535) throw Error(want);
  a.port = static_cast<int>(v);
  return a;
}

struct DashboardServer::Impl {
  // The connections refer to site and open: both outlive io, whose destruction ends the last connection.
  Site site;
  std::atomic<int> open{0};
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  std::string address;
  int port = 0;
  std::thread thread;

  void accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) {
        if (open.load() >= kMaxConnections) {
          beast::error_code ignored;
          socket.close(ignored);
        } else {
          close_on_exec(socket.native_handle());
          std::make_shared<Connection>(std::move(socket), site, open)->start();
        }
      }
      accept();
    });
  }
};

DashboardServer::DashboardServer(const ListenAddress& at, Site site) : impl_(std::make_unique<Impl>()) {
  impl_->site = std::move(site);
  const tcp::endpoint ep(asio::ip::make_address(at.address), static_cast<unsigned short>(at.port));
  boost::system::error_code ec;
  impl_->acceptor.open(ep.protocol(), ec);
  if (!ec) close_on_exec(impl_->acceptor.native_handle());
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(ep, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    throw Error("dashboard: cannot listen on " + at.address + ":" + std::to_string(at.port) + ": " + ec.message());
  }
  impl_->address = at.address;
  impl_->port = impl_->acceptor.local_endpoint().port();
  impl_->accept();
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

DashboardServer::~DashboardServer() {
  impl_->io.stop();
  impl_->thread.join();
}

int DashboardServer::port() const { return impl_->port; }

std::string DashboardServer::url() const {
  // An address that listens everywhere is opened here through the loopback address.
  std::string host = impl_->address == "0.0.0.0" ? "127.0.0.1" : impl_->address;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(impl_->port) + "/?token=" + impl_->site.token;
}

}  // namespace pshard::report::dashboard
