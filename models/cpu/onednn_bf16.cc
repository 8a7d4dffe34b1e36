// Whether oneDNN can compute in bf16 on this CPU: its bf16 convolutions and matmuls need AVX-512 (AVX512_BF16 or AMX
// run them fastest); oneDNN 2.x has none for AVX2 alone, and a primitive asked for then fails at its creation.
#include <string>

#include "models/cpu/onednn.h"
#include "models/cpu/onednn_state.h"

namespace pshard::models::cpu {

std::string bf16_kernels_missing() {
  static const std::string missing = []() -> std::string {
    using dt = memory::data_type;
    using tag = memory::format_tag;
    try {
      const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      // The kinds the bf16 backend makes (onednn_matmul.cc, onednn_conv.cc): bf16 operands, float32 results.
      const memory::desc a({8, 16}, dt::bf16, tag::ab), b({16, 8}, dt::bf16, tag::ab), c({8, 8}, dt::f32, tag::ab);
      dnnl::matmul::primitive_desc matmul(dnnl::matmul::desc(a, b, c), engine);
      const memory::desc src({1, 16, 8, 8}, dt::bf16, tag::nhwc), weights({16, 16, 3, 3}, dt::bf16, tag::any);
      const memory::desc dst({1, 16, 8, 8}, dt::f32, tag::nhwc);
      dnnl::convolution_forward::primitive_desc conv(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src,
                                          weights, dst, {1, 1}, {1, 1}, {1, 1}),
          engine);
      return "";
    } catch (const dnnl::error& e) {
      const dnnl_version_t* v = dnnl_version();
      return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
             " has no bf16 convolution or matmul for this CPU (they need AVX-512, and run fastest with AVX512_BF16 or "
             "AMX; creating one " +
             "failed: " + e.what() + ")";
    }
  }();
  return missing;
}

}  // namespace pshard::models::cpu
