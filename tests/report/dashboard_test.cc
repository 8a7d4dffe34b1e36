// The dashboard's server side: the metrics feed (whole lines after an offset, a new file starts over), the routes
// (token, paths, methods, offsets) and the HTTP server on a real socket.
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"
#include "report/dashboard/dashboard_server.h"
#include "report/dashboard/metrics_feed.h"
#include "report/dashboard/routes.h"

namespace pshard::report::dashboard {
namespace {

class DashboardTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "dashboard_test_" + std::to_string(::getpid()) + "_" +
           testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = dir_ + "/metrics.jsonl";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void append(const std::string& text) {
    std::ofstream out(path_, std::ios::app | std::ios::binary);
    out << text;
  }
  std::string dir_, path_;
};

std::string header(const Reply& r, const std::string& name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "<none>";
}

TEST_F(DashboardTest, TheFeedGivesWholeLinesOnceEach) {
  FeedChunk none = read_metrics_feed(path_, 0, "", 1 << 20);  // the job has not written yet
  EXPECT_EQ(none.lines, "");
  EXPECT_EQ(none.next, 0u);
  EXPECT_FALSE(none.reset);

  append("{\"event\":\"start\"}\n{\"event\":\"step\",\"step\":0}\n{\"event\":\"st");  // the writer is mid-line
  FeedChunk a = read_metrics_feed(path_, 0, "", 1 << 20);
  EXPECT_EQ(a.lines, "{\"event\":\"start\"}\n{\"event\":\"step\",\"step\":0}\n");
  EXPECT_EQ(a.next, a.lines.size());
  EXPECT_FALSE(a.file_id.empty());
  EXPECT_FALSE(a.reset);

  FeedChunk again = read_metrics_feed(path_, a.next, a.file_id, 1 << 20);  // nothing whole is new
  EXPECT_EQ(again.lines, "");
  EXPECT_EQ(again.next, a.next);

  append("ep\",\"step\":1}\n");
  FeedChunk b = read_metrics_feed(path_, a.next, a.file_id, 1 << 20);
  EXPECT_EQ(b.lines, "{\"event\":\"step\",\"step\":1}\n");
  EXPECT_EQ(b.next, std::filesystem::file_size(path_));
}

TEST_F(DashboardTest, TheFeedCutsLongReadsAtALineAndNeverSplitsOne) {
  const std::string one = "{\"event\":\"step\",\"loss\":0.5}\n";
  for (int i = 0; i < 10; ++i) append(one);
  FeedChunk c = read_metrics_feed(path_, 0, "", 1);  // less than a line: still the whole first line
  EXPECT_EQ(c.lines, one);
  c = read_metrics_feed(path_, c.next, c.file_id, one.size() * 3 + 5);
  EXPECT_EQ(c.lines, one + one + one);  // three fit, the fourth waits for the next chunk
  EXPECT_EQ(c.next, 4 * one.size());
  c = read_metrics_feed(path_, c.next, c.file_id, 1 << 20);
  EXPECT_EQ(c.next, 10 * one.size());
}

TEST_F(DashboardTest, ANewFileOrAShorterOneStartsThePageOver) {
  append("{\"event\":\"start\",\"n\":1}\n{\"event\":\"epoch\"}\n");
  FeedChunk a = read_metrics_feed(path_, 0, "", 1 << 20);
  // A resumed run moves the old file aside and writes a new one (pshard launch --resume).
  std::filesystem::rename(path_, path_ + ".before-step-10");
  append("{\"event\":\"start\",\"n\":2}\n");
  FeedChunk b = read_metrics_feed(path_, a.next, a.file_id, 1 << 20);
  EXPECT_TRUE(b.reset);
  EXPECT_EQ(b.lines, "{\"event\":\"start\",\"n\":2}\n");
  EXPECT_NE(b.file_id, a.file_id);
  FeedChunk c = read_metrics_feed(path_, 1000, b.file_id, 1 << 20);  // an offset past the end
  EXPECT_TRUE(c.reset);
  EXPECT_EQ(c.lines, b.lines);
  std::filesystem::remove(path_);
  FeedChunk d = read_metrics_feed(path_, b.next, b.file_id, 1 << 20);  // gone: the page forgets it
  EXPECT_TRUE(d.reset);
  EXPECT_EQ(d.lines, "");
}

TEST_F(DashboardTest, RoutesNeedTheTokenAndNameWhatIsWrong) {
  const Site site{dir_, "0123456789abcdef0123456789abcdef"};
  append("{\"event\":\"start\"}\n");
  for (const char* target :
       {"/", "/metrics", "/?token=", "/metrics?token=0123456789abcdef0123456789abcdee", "/?token=0123456789abcdef"}) {
    const Reply r = answer("GET", target, site);
    EXPECT_EQ(r.status, 403) << target;
    EXPECT_NE(r.body.find("needs the token"), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find("0123456789abcdef0123456789abcdef"), std::string::npos) << "the reply gives the token away";
  }
  const std::string t = "token=" + site.token;
  const Reply page = answer("GET", "/?" + t, site);
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("<title>pshard dashboard</title>"), std::string::npos);
  EXPECT_NE(page.body.find("fetch(\"metrics?token="), std::string::npos);

  const Reply m = answer("GET", "/metrics?from=0&" + t, site);
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.body, "{\"event\":\"start\"}\n");
  EXPECT_EQ(header(m, "X-Pshard-Next"), "18");
  EXPECT_EQ(header(m, "X-Pshard-Reset"), "0");
  EXPECT_EQ(header(m, "X-Pshard-Run"), dir_);
  const Reply m2 = answer("GET", "/metrics?from=18&file=" + header(m, "X-Pshard-File") + "&" + t, site);
  EXPECT_EQ(m2.body, "");
  EXPECT_EQ(header(m2, "X-Pshard-Next"), "18");

  const Reply bad = answer("GET", "/metrics?from=-4&" + t, site);
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("from must be a byte offset"), std::string::npos) << bad.body;
  EXPECT_EQ(answer("GET", "/metrics?from=12x&" + t, site).status, 400);
  EXPECT_EQ(answer("POST", "/metrics?" + t, site).status, 405);
  const Reply missing = answer("GET", "/etc/passwd?" + t, site);
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(missing.body.find("not found: /etc/passwd"), std::string::npos);
}

TEST(DashboardQuery, ValuesArePercentDecoded) {
  EXPECT_EQ(query_value("/metrics?from=3&file=2049%3A77&token=ab", "file"), "2049:77");
  EXPECT_EQ(query_value("/metrics?from=3&file=2049%3A77&token=ab", "token"), "ab");
  EXPECT_EQ(query_value("/metrics?from=3", "token"), "");
  EXPECT_EQ(query_value("/metrics", "from"), "");
  EXPECT_EQ(query_value("/?a+b=c%20d", "a b"), "c d");
}

TEST(DashboardListen, AddressesAreCheckedWithTheOptionNamed) {
  const ListenAddress a = parse_listen_address("127.0.0.1:8080", "--listen");
  EXPECT_EQ(a.address, "127.0.0.1");
  EXPECT_EQ(a.port, 8080);
  EXPECT_EQ(parse_listen_address("0.0.0.0:0", "--listen").port, 0);
  for (const char* bad : {"8080", "localhost:80", "127.0.0.1:", "127.0.0.1:70000", ":80", "127.0.0.1:8o"}) {
    try {
      parse_listen_address(bad, "--dashboard-listen");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--dashboard-listen"), std::string::npos) << e.what();
    }
  }
}

// One HTTP/1.1 request over a real socket; returns the whole response (the server closes after Connection: close).
std::string http_get(int port, const std::string& target) {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  s.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  const std::string req = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  asio::write(s, asio::buffer(req));
  std::string out;
  boost::system::error_code ec;
  char buf[4096];
  for (;;) {
    const size_t n = s.read_some(asio::buffer(buf), ec);
    out.append(buf, n);
    if (ec) break;
  }
  return out;
}

TEST_F(DashboardTest, TheServerAnswersOverHttp) {
  append("{\"event\":\"start\",\"model\":\"mlp\"}\n");
  DashboardServer server(ListenAddress{"127.0.0.1", 0}, Site{dir_, "feedfacefeedfacefeedfacefeedface"});
  ASSERT_GT(server.port(), 0);
  EXPECT_EQ(server.url(),
            "http://127.0.0.1:" + std::to_string(server.port()) + "/?token=feedfacefeedfacefeedfacefeedface");
  const std::string m = http_get(server.port(), "/metrics?token=feedfacefeedfacefeedfacefeedface&from=0");
  EXPECT_EQ(m.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << m;
  EXPECT_NE(m.find("X-Pshard-Next: 32\r\n"), std::string::npos) << m;
  EXPECT_NE(m.find("Cache-Control: no-store\r\n"), std::string::npos) << m;
  EXPECT_NE(m.find("\r\n\r\n{\"event\":\"start\",\"model\":\"mlp\"}\n"), std::string::npos) << m;
  const std::string refused = http_get(server.port(), "/");
  EXPECT_EQ(refused.rfind("HTTP/1.1 403 Forbidden\r\n", 0), 0u) << refused;
  // A second server cannot take the same port; the error names the address.
  try {
    DashboardServer again(ListenAddress{"127.0.0.1", server.port()}, Site{dir_, "x"});
    ADD_FAILURE() << "a second server listened on a taken port";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot listen on 127.0.0.1:" + std::to_string(server.port())),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace pshard::report::dashboard
