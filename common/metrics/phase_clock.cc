// Per-thread phase accounting.
#include "common/metrics/phase_clock.h"

#include "common/error.h"
#include "common/metrics/trace.h"

namespace pshard {
namespace {
thread_local PhaseClock* this_thread_clock = nullptr;
}

PhaseTotals::PhaseTotals(size_t phases) : ns_(phases) {
  for (auto& n : ns_) n.store(0, std::memory_order_relaxed);
}

double PhaseTotals::seconds(size_t phase) const {
  return static_cast<double>(ns_.at(phase).load(std::memory_order_relaxed)) * 1e-9;
}

std::vector<double> PhaseTotals::seconds() const {
  std::vector<double> out;
  for (size_t i = 0; i < ns_.size(); ++i) out.push_back(seconds(i));
  return out;
}

void PhaseTotals::add(size_t phase, int64_t ns) { ns_.at(phase).fetch_add(ns, std::memory_order_relaxed); }

PhaseClock::PhaseClock(PhaseTotals& totals, size_t initial, Clock::time_point since)
    : totals_(totals), phase_(initial), since_(since), outer_(this_thread_clock) {
  if (initial >= totals.size()) throw Error("PhaseClock: phase " + std::to_string(initial) + " out of range");
  this_thread_clock = this;
}

void PhaseClock::trace_to(Tracer* tracer, const char* const* names) {
  tracer_ = tracer;
  names_.clear();
  if (tracer) {
    for (size_t p = 0; p < totals_.size(); ++p) names_.push_back(tracer->name(names[p]).id);
  }
}

PhaseClock::~PhaseClock() {
  flush();
  this_thread_clock = outer_;
}

size_t PhaseClock::enter(size_t phase) {
  const size_t previous = phase_;
  flush();
  phase_ = phase;
  return previous;
}

PhaseClock::Clock::time_point PhaseClock::flush() {
  const Clock::time_point now = Clock::now();
  totals_.add(phase_, std::chrono::duration_cast<std::chrono::nanoseconds>(now - since_).count());
  if (tracing_ && now > since_) tracer_->span(TraceName{names_[phase_]}, "phase", since_, now);
  since_ = now;
  return now;
}

PhaseClock* PhaseClock::current() { return this_thread_clock; }

}  // namespace pshard
