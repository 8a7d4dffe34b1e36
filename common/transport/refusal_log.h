// Rate-limited logging of refused peers: one line at once, then a count per peer and kind per interval.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace pshard::transport {

// A peer that retries every few microseconds (or floods garbage) must not flood the log. The first refusal of a
// (peer, kind) is logged at once as "<who>: <what>"; later ones within `interval` are counted, and one line per
// interval summarises them: "<who>: refused 19999 more messages from 127.0.0.1 (badHeader) in the last 10 s".
// At most kMaxTracked (peer, kind) pairs are tracked; refusals beyond that count under the peer "other peers".
// Not thread-safe: one per socket thread.
//
//   RefusalLog refusals("server 0");
//   refusals.add(peer_address(frames.back()), "badHeader", "refused message from 127.0.0.1: badHeader: ...");
//   refusals.flush();  // now and then (the socket loop's tick): summaries of intervals that ended
class RefusalLog {
 public:
  static constexpr size_t kMaxTracked = 1024;

  explicit RefusalLog(std::string who, std::chrono::milliseconds interval = std::chrono::seconds(10));
  void add(const std::string& peer, const std::string& kind, const std::string& what);
  // Writes the summary of every (peer, kind) whose interval has ended with refusals not yet logged.
  void flush();

  uint64_t refusals() const { return refusals_; }  // every add()
  uint64_t lines() const { return lines_; }        // lines written

 private:
  struct Entry {
    std::chrono::steady_clock::time_point since;  // start of the current interval (the last line)
    uint64_t suppressed = 0;                      // refusals since that line
  };
  void summarise(const std::pair<std::string, std::string>& key, Entry& e, std::chrono::steady_clock::time_point now);

  std::string who_;
  std::chrono::milliseconds interval_;
  std::map<std::pair<std::string, std::string>, Entry> entries_;  // (peer, kind)
  uint64_t refusals_ = 0, lines_ = 0;
};

}  // namespace pshard::transport
