// StallWatch: stall reports, stuck workers and given-up reads.
#include "server/kv/stall_watch.h"

#include <algorithm>
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

double seconds_between(StallWatch::Clock::time_point from, StallWatch::Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// "fc1.weight[slice 0]: the read for step 12 waited 6.4 s for the push of worker 1, which did not come"
std::string account(const Slice& s, int64_t step, double waited_s, const std::vector<uint32_t>& missing) {
  const std::string what = !s.initialized() ? "worker 0's initial weights" : "the push of " + describe_workers(missing);
  return s.name() + ": the read for step " + std::to_string(step) + " waited " + seconds(waited_s) + " for " + what +
         ", which did not come";
}

}  // namespace

StallWatch::StallWatch(uint32_t server_rank, std::chrono::milliseconds warn_after,
                       std::chrono::milliseconds stuck_after, std::chrono::milliseconds give_up_after,
                       std::function<void(const StallReport&)> on_stall)
    : server_(server_rank),
      warn_after_(warn_after),
      stuck_after_(stuck_after),
      give_up_after_(give_up_after),
      on_stall_(std::move(on_stall)) {}

std::vector<RequestPtr> StallWatch::check(const Slice& s, std::vector<Waiter>& waiting, Clock::time_point now,
                                          const DeadWorkers& dead) {
  std::vector<RequestPtr> finished;
  if (waiting.empty()) return finished;
  const Waiter* oldest = nullptr;
  for (const Waiter& w : waiting) {
    if (!oldest || w.since < oldest->since) oldest = &w;
  }
  const auto waited = now - oldest->since;
  const bool judge = stuck_after_.count() > 0 && waited >= stuck_after_;
  if (warn_after_.count() <= 0 && !judge && waited < give_up_after_) return finished;

  StallReport r;
  r.server = server_;
  r.step = oldest->step;
  r.waited_s = std::chrono::duration<double>(waited).count();
  r.slice = s.name();
  r.initial_weights = !s.initialized();
  r.missing = r.initial_weights ? std::vector<uint32_t>{0} : s.policy->missing(oldest->step, dead);
  if (warn_after_.count() > 0 && waited >= warn_after_) report(r, waited / warn_after_);
  if (judge && !r.missing.empty()) {
    r.stuck = true;
    r.why = account(s, r.step, r.waited_s, r.missing);
    report_stuck(std::move(r));
  }

  std::vector<Waiter> still;
  for (Waiter& w : waiting) {
    if (now - w.since < give_up_after_) {
      still.push_back(std::move(w));
      continue;
    }
    const std::vector<uint32_t> missing = s.initialized() ? s.policy->missing(w.step, dead) : std::vector<uint32_t>{0};
    w.req->fail(protocol::ErrorCode::STALLED, account(s, w.step, seconds_between(w.since, now), missing) +
                                                  " (given up before the workers' cluster.request_timeout_ms)");
    if (w.req->finish_key()) finished.push_back(std::move(w.req));
  }
  waiting.swap(still);
  return finished;
}

void StallWatch::pushed(uint32_t rank, Clock::time_point now) {
  if (rank >= last_push_.size()) return;  // before the clocks started (they start later than this push)
  last_push_[rank] = now;
  judged_[rank] = 0;
}

void StallWatch::check_pushes(Clock::time_point now, const DeadWorkers& dead) {
  if (stuck_after_.count() <= 0) return;
  if (last_push_.empty()) {
    last_push_.assign(dead.size(), now);
    judged_.assign(dead.size(), 0);
    return;
  }
  StallReport r;
  r.server = server_;
  r.step = -1;
  Clock::time_point oldest = now;
  for (uint32_t w = 0; w < last_push_.size(); ++w) {
    if (dead[w] || judged_[w] || now - last_push_[w] < stuck_after_) continue;
    judged_[w] = 1;
    r.missing.push_back(w);
    oldest = std::min(oldest, last_push_[w]);
  }
  if (r.missing.empty()) return;
  r.waited_s = seconds_between(oldest, now);
  r.stuck = true;
  r.why = "no push from " + describe_workers(r.missing) + " for " + seconds(r.waited_s) +
          " (async mode: a worker that stops pushing would hold up the end of the job)";
  // A worker that finished its run and left pushes no more either: the coordinator, which knows, ignores those.
  PSHARD_LOG(kInfo) << "server " << server_ << ": " << r.why << "; reported as stuck";
  if (on_stall_) on_stall_(r);
}

void StallWatch::report_stuck(StallReport r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r.step <= stuck_step_) return;
    stuck_step_ = r.step;
  }
  PSHARD_LOG(kWarn) << "server " << server_ << ": " << describe_workers(r.missing)
                    << (r.missing.size() == 1 ? " is" : " are") << " stuck: " << r.why;
  if (on_stall_) on_stall_(r);
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
