// The dashboard's answers, one function from a request line to a reply, so that they are tested without sockets
// (the HTTP server, dashboard_server.h, only carries them).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace pshard::report::dashboard {

// What the dashboard shows and who may see it.
struct Site {
  std::string run_dir;  // the run whose metrics.jsonl the page reads
  std::string token;    // every request carries it as ?token=...: the page and its data are the job's
};

struct Reply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // beyond Content-Type and Content-Length
};

// GET /?token=T: the page. GET /metrics?token=T&from=N&file=ID: the run's metrics lines after offset N
// (metrics_feed.h; the offset to ask from next in X-Pshard-Next, the file's id in X-Pshard-File, X-Pshard-Reset: 1
// when the page must start over). A missing or wrong token: 403; another path: 404; another method: 405; a bad
// offset: 400. Every reply names what was wrong in its body.
Reply answer(const std::string& method, const std::string& target, const Site& site);

// The value of `name` in a target's query string ("/metrics?from=3&x=y" -> "3" for "from"), percent-decoded; ""
// when absent.
std::string query_value(const std::string& target, const std::string& name);

}  // namespace pshard::report::dashboard
