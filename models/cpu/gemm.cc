// CPU GEMM: OpenBLAS sgemm (single-threaded) with the output split over the OpenMP threads.
#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "models/cpu/kernels.h"

namespace pshard::models::cpu {
namespace {
// Below this many multiply-adds one thread is faster than waking the others.
constexpr int64_t kParallelMacs = int64_t{1} << 18;
// Column / row blocks handed to a thread are multiples of this (OpenBLAS's register blocking).
constexpr int64_t kBlock = 16;
}  // namespace

void gemm_serial(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads <= 1 || m * n * k < kParallelMacs) {
    gemm_serial(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Each thread packs the operand that is not split: split the larger side so that the copy is the smaller one.
  const bool split_n = n >= m;
  const int64_t extent = split_n ? n : m;
  int64_t part = (extent + threads - 1) / threads;
  part = (part + kBlock - 1) / kBlock * kBlock;
  const int64_t parts = (extent + part - 1) / part;
#pragma omp parallel for schedule(static) num_threads(static_cast <int>(std::min <int64_t>(threads, parts)))
  for (int64_t t = 0; t < parts; ++t) {
    const int64_t first = t * part, count = std::min(part, extent - first);
    if (split_n) {
      // Columns [first, first + count) of C and of op(B).
      const float* bt = trans_b ? b + first * ldb : b + first;
      gemm_serial(trans_a, trans_b, m, count, k, alpha, a, lda, bt, ldb, beta, c + first, ldc);
    } else {
      // Rows [first, first + count) of C and of op(A).
      const float* at = trans_a ? a + first : a + first * lda;
      gemm_serial(trans_a, trans_b, count, n, k, alpha, at, lda, b, ldb, beta, c + first * ldc, ldc);
    }
  }
}

}  // namespace pshard::models::cpu
