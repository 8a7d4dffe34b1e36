// Where a thread's time goes: the thread is always in exactly one phase of a fixed list, and the
// time between two switches is added to the phase it was in. A thread's phases therefore add up to
// its wall time by construction: nothing falls between two phases and nothing is counted twice
// (a nested phase pauses the outer one, e.g. a wait for a pull inside the forward pass).
//
//   enum Phase : size_t { kWork, kWait, kOther, kNumPhases };
//   PhaseTotals totals(kNumPhases);   // shared: any thread may read it
//   {
//     PhaseClock clock(totals, kOther);  // on the measured thread; ScopedPhase finds it there
//     ScopedPhase work(kWork);
//     ...                                 // counts as kWork
//     { ScopedPhase wait(kWait); ... }    // counts as kWait, not as kWork
//     clock.flush();                      // totals now include the time up to here
//   }
//   double work_s = totals.seconds(kWork);
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace pshard {

class Tracer;

// Seconds per phase, summed over every thread that counts into it. Thread-safe.
class PhaseTotals {
 public:
  explicit PhaseTotals(size_t phases);
  size_t size() const { return ns_.size(); }
  double seconds(size_t phase) const;
  std::vector<double> seconds() const;  // every phase
  void add(size_t phase, int64_t ns);

 private:
  std::vector<std::atomic<int64_t>> ns_;
};

// The phase clock of one thread: created and destroyed on that thread, which it serves as
// PhaseClock::current() meanwhile (an outer clock of the same thread is restored afterwards).
class PhaseClock {
 public:
  using Clock = std::chrono::steady_clock;

  // `since`: when the thread's time starts counting (e.g. when its owner created it, so that a
  // thread that waited to be scheduled counts that wait in `initial`).
  PhaseClock(PhaseTotals& totals, size_t initial, Clock::time_point since = Clock::now());
  ~PhaseClock();  // flushes
  PhaseClock(const PhaseClock&) = delete;
  PhaseClock& operator=(const PhaseClock&) = delete;

  // Switches to `phase` now; returns the phase the thread was in.
  size_t enter(size_t phase);
  // Adds the time since the last switch to the current phase, so that the totals are up to date
  // at the returned instant.
  Clock::time_point flush();
  size_t phase() const { return phase_; }

  // While tracing is on, every stretch of time in a phase is also a span named names[phase] on
  // `tracer` (category "phase", the calling thread's row); `names` holds one name per phase.
  void trace_to(Tracer* tracer, const char* const* names);
  void set_tracing(bool on) { tracing_ = on && tracer_ != nullptr; }

  // This thread's clock; nullptr when none is installed (ScopedPhase then does nothing).
  static PhaseClock* current();

 private:
  PhaseTotals& totals_;
  size_t phase_;
  Clock::time_point since_;
  PhaseClock* outer_;
  Tracer* tracer_ = nullptr;
  std::vector<uint32_t> names_;  // per phase: the TraceName kept by tracer_
  bool tracing_ = false;
};

// The calling thread is in `phase` for the scope's lifetime, then back in the phase it was in.
// Costs two clock reads; nothing without a PhaseClock on the thread.
class ScopedPhase {
 public:
  explicit ScopedPhase(size_t phase) : clock_(PhaseClock::current()) {
    if (clock_) previous_ = clock_->enter(phase);
  }
  template <class Phase, class = std::enable_if_t<std::is_enum_v<Phase>>>
  explicit ScopedPhase(Phase phase) : ScopedPhase(static_cast<size_t>(phase)) {}
  ~ScopedPhase() {
    if (clock_) clock_->enter(previous_);
  }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  PhaseClock* clock_;
  size_t previous_ = 0;
};

}  // namespace pshard
