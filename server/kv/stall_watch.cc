// StallWatch: stall reports and given-up reads.
#include "server/kv/stall_watch.h"

#include <cstdio>

#include "common/util/log.h"
#include "server/kv/slice_store.h"

namespace pshard {

std::string describe_workers(const std::vector<uint32_t>& ranks) {
  if (ranks.empty()) return "no worker";
  std::string s = ranks.size() == 1 ? "worker " : "workers ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

namespace {

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

}  // namespace

StallWatch::StallWatch(uint32_t server_rank, std::chrono::milliseconds warn_after,
                       std::chrono::milliseconds give_up_after, std::function<void(const StallReport&)> on_stall)
    : server_(server_rank), warn_after_(warn_after), give_up_after_(give_up_after), on_stall_(std::move(on_stall)) {}

std::vector<RequestPtr> StallWatch::check(Slice& s, Clock::time_point now, const DeadWorkers& dead) {
  std::vector<RequestPtr> finished;
  if (s.waiting.empty()) return finished;
  const Waiter* oldest = nullptr;
  for (const Waiter& w : s.waiting) {
    if (!oldest || w.since < oldest->since) oldest = &w;
  }
  const auto waited = now - oldest->since;
  if (warn_after_.count() <= 0 && waited < give_up_after_) return finished;

  StallReport r;
  r.server = server_;
  r.step = oldest->step;
  r.waited_s = std::chrono::duration<double>(waited).count();
  r.slice = s.name();
  r.initial_weights = !s.initialized();
  r.missing = r.initial_weights ? std::vector<uint32_t>{0} : s.policy->missing(oldest->step, dead);
  if (warn_after_.count() > 0 && waited >= warn_after_) report(r, waited / warn_after_);

  std::vector<Waiter> still;
  for (Waiter& w : s.waiting) {
    if (now - w.since < give_up_after_) {
      still.push_back(std::move(w));
      continue;
    }
    const double w_s = std::chrono::duration<double>(now - w.since).count();
    const std::string what = r.initial_weights ? "worker 0's initial weights"
                                               : "the push of " + describe_workers(s.policy->missing(w.step, dead));
    w.req->fail(protocol::ErrorCode::STALLED,
                s.name() + ": the read for step " + std::to_string(w.step) + " waited " + seconds(w_s) + " for " +
                    what + ", which did not come (given up before the workers' cluster.request_timeout_ms)");
    if (w.req->finish_key()) finished.push_back(std::move(w.req));
  }
  s.waiting.swap(still);
  return finished;
}

void StallWatch::report(StallReport r, int64_t times_warned) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r.step < reported_step_ || (r.step == reported_step_ && times_warned <= reported_times_)) return;
    reported_step_ = r.step;
    reported_times_ = times_warned;
  }
  PSHARD_LOG(kWarn) << "server " << server_ << ": step " << r.step << " has waited " << seconds(r.waited_s) << " for "
                    << (r.initial_weights ? "worker 0's initial weights" : describe_workers(r.missing) + " to push")
                    << " (" << r.slice << ")";
  if (on_stall_) on_stall_(r);
}

}  // namespace pshard
