#include "report/dashboard/routes.h"

#include <cstdint>

#include "common/error.h"
#include "common/transport/peer_auth.h"
#include "report/dashboard/metrics_feed.h"
#include "report/dashboard/page.h"

namespace pshard::report::dashboard {
namespace {

// A chunk of at most about this many bytes per request: a long run's page catches up in a few requests.
constexpr size_t kMaxChunk = 4 << 20;

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decoded(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

Reply refuse(int status, const std::string& why) {
  Reply r;
  r.status = status;
  r.body = why + "\n";
  return r;
}

Reply metrics(const std::string& target, const Site& site) {
  const std::string from_text = query_value(target, "from");
  uint64_t from = 0;
  if (!from_text.empty()) {
    size_t used = 0;
    try {
      from = std::stoull(from_text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != from_text.size() || from_text[0] == '-') {
      return refuse(400, "bad request: from must be a byte offset (a whole number >= 0), got '" + from_text + "'");
    }
  }
  FeedChunk c;
  try {
    c = read_metrics_feed(site.run_dir + "/metrics.jsonl", from, query_value(target, "file"), kMaxChunk);
  } catch (const Error& e) {
    return refuse(500, e.what());
  }
  Reply r;
  r.content_type = "application/x-ndjson";
  r.body = std::move(c.lines);
  // The run's directory heads the page; a header value holds no control characters.
  std::string run = site.run_dir;
  for (char& ch : run) {
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = ' ';
  }
  r.headers = {{"X-Pshard-Next", std::to_string(c.next)},
               {"X-Pshard-File", c.file_id},
               {"X-Pshard-Reset", c.reset ? "1" : "0"},
               {"X-Pshard-Run", run}};
  return r;
}

}  // namespace

std::string query_value(const std::string& target, const std::string& name) {
  const size_t q = target.find('?');
  if (q == std::string::npos) return "";
  size_t at = q + 1;
  while (at <= target.size()) {
    size_t end = target.find('&', at);
    if (end == std::string::npos) end = target.size();
    const std::string pair = target.substr(at, end - at);
    const size_t eq = pair.find('=');
    if (percent_decoded(pair.substr(0, eq)) == name) {
      return eq == std::string::npos ? "" : percent_decoded(pair.substr(eq + 1));
    }
    at = end + 1;
  }
  return "";
}

Reply answer(const std::string& method, const std::string& target, const Site& site) {
  const std::string path = target.substr(0, target.find('?'));
  if (path != "/" && path != "/index.html" && path != "/metrics") return refuse(404, "not found: " + path);
  if (method != "GET") return refuse(405, "method not allowed: " + method + " (the dashboard answers GET only)");
  const std::string token = query_value(target, "token");
  if (token.empty() || !transport::same_secret(token, site.token)) {  // in time independent of where they differ
    return refuse(403,
                  "forbidden: the dashboard needs the token of the URL that pshard printed "
                  "(http://HOST:PORT/?token=...)");
  }
  if (path == "/metrics") return metrics(target, site);
  Reply r;
  r.content_type = "text/html; charset=utf-8";
  r.body = kPage;
  return r;
}

}  // namespace pshard::report::dashboard
