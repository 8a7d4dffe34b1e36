// oneDNN matmul as the backend's GEMM (Linear layers): about twice OpenBLAS's speed here, where OpenBLAS is pinned
// to Haswell (AVX2) kernels and oneDNN uses AVX-512 (docs/PERFORMANCE.md).
#include <cstring>
#include <string>

#include "common/error.h"
#include "models/cpu/kernels.h"
#include "models/cpu/onednn_state.h"

namespace pshard::models::cpu {
namespace {

int64_t bits_of(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

// op(X) of a row-major matrix with leading dimension ld as a rows x cols view: transposed = swapped strides.
memory::desc view(int64_t rows, int64_t cols, int64_t ld, bool transposed, memory::data_type type = kF32) {
  return memory::desc({rows, cols}, type, transposed ? memory::dims{1, ld} : memory::dims{ld, 1});
}

}  // namespace

void OneDnnKernels::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                         int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    // Nothing to multiply: C = beta C, which the reference does.
    cpu::gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  try {
    State& st = *state_;
    const MatmulKey key = {trans_a, trans_b, m, n, k, lda, ldb, ldc, bits_of(alpha), bits_of(beta)};
    const memory::desc ad = view(m, k, lda, trans_a), bd = view(k, n, ldb, trans_b), cd = view(m, n, ldc, false);
    // The operands as the matmul reads them: the caller's float32 matrices, or bf16 copies in the same layout
    // (train.precision = bf16: reordered into the arena); C is float32 either way.
    const memory::desc a_in = view(m, k, lda, trans_a, st.operand), b_in = view(k, n, ldb, trans_b, st.operand);
    auto it = st.matmuls.find(key);
    if (it == st.matmuls.end()) {
      dnnl::primitive_attr attr = st.attr;
      if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
      if (beta != 0.0f) {
        dnnl::post_ops ops;
        ops.append_sum(beta);
        attr.set_post_ops(ops);
      }
      MatmulPrimitive p;
      p.pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_in, b_in, cd), attr, st.engine);
      p.matmul = dnnl::matmul(p.pd);
      it = st.matmuls.emplace(key, std::move(p)).first;
    }
    // A float32 matmul reads and writes the caller's strided matrices directly (no reorders).
    st.run(it->second.matmul, it->second.pd.scratchpad_desc(),
           {{DNNL_ARG_SRC, a_in, ad, const_cast<float*>(a), false},
            {DNNL_ARG_WEIGHTS, b_in, bd, const_cast<float*>(b), false},
            {DNNL_ARG_DST, cd, cd, c, true}});
  } catch (const dnnl::error& e) {
    throw Error("onednn: gemm " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                " failed: " + e.what());
  }
}

}  // namespace pshard::models::cpu
