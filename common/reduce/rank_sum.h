// The reduction of a synchronous step (cluster.mode = sync): the workers' gradients summed in rank order, one float32
// addition per contribution, and divided by the number of workers once, at the end. The server's BSP policy
// (server/consistency/bsp.cc) and a host's leader summing its workers' gradients into one push
// (cluster.host_aggregation, worker/client/host_group.cc) both add through here; the policy decides only who is in
// a step. Another reduction (a weighted or compressed one) would sit beside these.
//
// Rounding contract. A float32 sum depends on its order, and both sides add left to right in rank order. A host whose
// workers are the lowest ranks of the job, 0..w-1, sends ((g0 + g1) + ...) + g[w-1]; the server continues that sum
// exactly as it would have continued its own, so the step's mean is bitwise the one the server alone computes.
// Folding the division into the last addition, (s + g) / n, rounds as dividing the rounded sum afterwards (each
// operation rounds once either way). A host of other ranks (1 and 2 beside rank 0) gives another rounding of the
// same mean. rank_sum_test checks each of these.
//
//   reduce::sum_start(g0, g1, acc, n);        // acc = g0 + g1
//   reduce::sum_add(acc, g2, n);              // acc += g2
//   reduce::sum_add_mean(acc, g3, n, 4);      // acc = (acc + g3) / 4
#pragma once

#include <cstddef>
#include <cstdint>

namespace pshard::reduce {

// out[i] = a[i] + b[i]: the first addition of a sum (out may be a).
void sum_start(const float* a, const float* b, float* out, size_t n);
// out[i] = (a[i] + b[i]) / count: a sum of two contributions that is also the last.
void sum_start_mean(const float* a, const float* b, float* out, size_t n, uint32_t count);
// acc[i] += g[i]
void sum_add(float* acc, const float* g, size_t n);
// acc[i] = (acc[i] + g[i]) / count: the last addition and the mean in one pass.
void sum_add_mean(float* acc, const float* g, size_t n, uint32_t count);
// out[i] = sum[i] / count: the mean of a finished sum (out may be sum).
void mean(const float* sum, float* out, size_t n, uint32_t count);

}  // namespace pshard::reduce
