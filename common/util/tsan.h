// Happens-before annotations for ThreadSanitizer, for orderings made where TSan cannot see them.
#pragma once

// TSan follows mutexes and atomics in instrumented code only. libzmq is not instrumented: when
// a thread hands ZeroMQ a zero-copy message and ZeroMQ's I/O thread later calls its free
// callback, the lock-free queue in between orders the two, but TSan sees no order and reports
// the callback's reads of the hint as a race. The sender calls tsan_release(hint) before the
// hand-off and the callback tsan_acquire(hint) first; both are no-ops outside TSan builds.
//
//   auto* hint = new Hint{...};
//   tsan_release(hint);
//   return zmq::message_t(data, bytes, &free_fn, hint);
//   ...
//   void free_fn(void* data, void* hint) { tsan_acquire(hint); ... }

#if defined(__SANITIZE_THREAD__)
#define PSHARD_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PSHARD_TSAN 1
#endif
#endif

#ifdef PSHARD_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace pshard {

// Everything this thread did so far happens before what follows a later tsan_acquire(addr).
inline void tsan_release([[maybe_unused]] const void* addr) {
#ifdef PSHARD_TSAN
  __tsan_release(const_cast<void*>(addr));
#endif
}

// What preceded every earlier tsan_release(addr) happens before what this thread does next.
inline void tsan_acquire([[maybe_unused]] const void* addr) {
#ifdef PSHARD_TSAN
  __tsan_acquire(const_cast<void*>(addr));
#endif
}

}  // namespace pshard
