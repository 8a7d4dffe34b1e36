// Large copies that bypass this core's cache: into shared-memory slots, and of pulled weights.
#pragma once

#include <cstddef>

namespace pshard {

// Copies `bytes` from `src` to `dst` like memcpy, but writes with non-temporal stores on x86-64: the destination's
// lines are not read in first and do not evict this core's working set. Right for a large destination that another
// process reads next (a shared-memory slot: the server's weights, a worker's gradients) or that is far larger than
// this core's cache (the pulled weights of a slice), where a plain copy reads each line in before overwriting it; on
// the 2-core development VM a 1 MiB slice from cache into a cold slot copies 2 x as fast (21 against 10 GB/s), from a
// cold source 1.2 x. Elsewhere, and under the sanitizers (which do not see the intrinsics' stores), it is memcpy;
// below 4 KiB always. Ends with a store fence, so a release store after it publishes the bytes.
void copy_past_cache(void* dst, const void* src, size_t bytes);

// The same copy of `n` floats, looking at every value on the way: returns the index of the first NaN or infinity,
// or n when there is none. The check costs nothing measurable next to the copy's memory traffic, so the reader of
// `dst` need not read the values once more only to check them.
size_t copy_floats_past_cache(float* dst, const float* src, size_t n);

}  // namespace pshard
