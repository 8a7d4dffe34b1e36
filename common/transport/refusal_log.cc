// Rate-limited refusal lines (see refusal_log.h).
#include "common/transport/refusal_log.h"

#include "common/util/log.h"

namespace pshard::transport {

RefusalLog::RefusalLog(std::string who, std::chrono::milliseconds interval)
    : who_(std::move(who)), interval_(interval) {}

void RefusalLog::add(const std::string& peer, const std::string& kind, const std::string& what) {
  ++refusals_;
  const auto now = std::chrono::steady_clock::now();
  std::pair<std::string, std::string> key{peer, kind};
  if (entries_.size() >= kMaxTracked && entries_.find(key) == entries_.end()) key.first = "other peers";
  auto [it, first] = entries_.try_emplace(key);
  Entry& e = it->second;
  if (first || (e.suppressed == 0 && now - e.since >= interval_)) {  // new, or quiet for an interval
    PSHARD_LOG(kWarn) << who_ << ": " << what;
    ++lines_;
    e.since = now;
    return;
  }
  ++e.suppressed;
  if (now - e.since >= interval_) summarise(it->first, e, now);
}

void RefusalLog::flush() {
  const auto now = std::chrono::steady_clock::now();
  for (auto& [key, e] : entries_) {
    if (e.suppressed > 0 && now - e.since >= interval_) summarise(key, e, now);
  }
}

void RefusalLog::summarise(const std::pair<std::string, std::string>& key, Entry& e,
                           std::chrono::steady_clock::time_point now) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - e.since).count();
  PSHARD_LOG(kWarn) << who_ << ": refused " << e.suppressed << " more from " << key.first << " (" << key.second
                    << ") in the last " << (ms + 500) / 1000 << " s";
  ++lines_;
  e.suppressed = 0;
  e.since = now;
}

}  // namespace pshard::transport
