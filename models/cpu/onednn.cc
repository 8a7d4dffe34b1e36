// The oneDNN kernels' shared machinery: engine, stream and running a primitive on plain tensors via the arena.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <utility>

#include "common/compression/fp16.h"
#include "common/error.h"
#include "models/cpu/onednn_state.h"

namespace pshard::models::cpu {
namespace {
constexpr size_t kAlign = 64;  // bytes; oneDNN's JIT kernels want cache-line aligned buffers

// oneDNN splits a primitive's work for omp_get_max_threads() threads and some kernels count on every
// one of them running; OpenMP never gives a team more than OMP_THREAD_LIMIT threads, so with a lower
// limit (the TSan step runs with 1) the work of the missing threads was silently not done (a GEMM
// half computed, barriers never reached). Ask for no more threads than the limit allows.
void cap_threads_at_limit() {
  const int limit = omp_get_thread_limit();
  if (omp_get_max_threads() > limit) omp_set_num_threads(limit);
}

// What a convolution or matmul reads as its operands: its source, weights and output gradient (not the bias).
bool is_operand(const dnnl::primitive& p, const Arg& a) {
  const auto kind = p.get_kind();
  if (kind != dnnl::primitive::kind::convolution && kind != dnnl::primitive::kind::matmul) return false;
  return !a.output && (a.id == DNNL_ARG_SRC || a.id == DNNL_ARG_WEIGHTS || a.id == DNNL_ARG_DIFF_DST);
}
}  // namespace

OneDnnKernels::State::State(Arena a, bool block, memory::data_type operand_type, bool fp16_operands)
    : arena(std::move(a)), block_channels(block), operand(operand_type), fp16(fp16_operands) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
}

void OneDnnKernels::State::run(const std::vector<Step>& steps) {
  cap_threads_at_limit();
  size_t bytes = 0;
  auto take = [&](size_t n) {
    size_t at = bytes;
    bytes += (n + kAlign - 1) / kAlign * kAlign;
    return at;
  };
  // Arena layout: one region per reordered tensor (inputs read by several steps share theirs), then one scratchpad
  // region for the largest step (steps run one after the other).
  // fp16 operands are a copy rounded to half precision, in the arena even where the format is the caller's.
  auto rounded = [&](size_t s, const Arg& a) { return fp16 && is_operand(steps[s].primitive, a); };
  struct Placed {
    size_t offset;
    bool shared;  // an input already reordered for an earlier step
  };
  std::vector<std::vector<Placed>> placed(steps.size());
  size_t scratch_bytes = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    for (const Arg& a : steps[s].args) {
      Placed p{0, false};
      if (a.want != a.plain || rounded(s, a)) {
        for (size_t e = 0; e < s && !p.shared; ++e) {
          for (size_t i = 0; i < steps[e].args.size(); ++i) {
            const Arg& b = steps[e].args[i];
            if (!a.output && !b.output && b.data == a.data && b.want == a.want && rounded(e, b) == rounded(s, a)) {
              p = {placed[e][i].offset, true};
              break;
            }
          }
        }
        if (!p.shared) p.offset = take(a.want.get_size());
      }
      placed[s].push_back(p);
    }
    scratch_bytes = std::max(scratch_bytes, steps[s].scratchpad.get_size());
  }
  const size_t scratch_at = take(scratch_bytes);
  char* base = reinterpret_cast<char*>(arena(static_cast<int64_t>(bytes / sizeof(float)) + 1));

  for (size_t s = 0; s < steps.size(); ++s) {
    std::unordered_map<int, memory> exec_args;
    std::vector<std::pair<memory, memory>> write_back;  // (primitive's, caller's)
    for (size_t i = 0; i < steps[s].args.size(); ++i) {
      const Arg& a = steps[s].args[i];
      memory user(a.plain, engine, a.data);
      const bool round = rounded(s, a);
      if (a.want == a.plain && !round) {
        exec_args.emplace(a.id, user);
        continue;
      }
      memory mine(a.want, engine, base + placed[s][i].offset);
      if (a.output) {
        write_back.emplace_back(mine, user);
      } else if (!placed[s][i].shared) {
        if (a.want == a.plain) {
          std::memcpy(mine.get_data_handle(), a.data, a.plain.get_size());
        } else {
          dnnl::reorder(user, mine).execute(stream, user, mine);
          stream.wait();
        }
        if (round) compression::round_to_fp16(static_cast<float*>(mine.get_data_handle()), a.want.get_size() / 4);
      }
      exec_args.emplace(a.id, mine);
    }
    exec_args.emplace(DNNL_ARG_SCRATCHPAD, memory(steps[s].scratchpad, engine, base + scratch_at));
    steps[s].primitive.execute(stream, exec_args);
    for (auto& [mine, user] : write_back) dnnl::reorder(mine, user).execute(stream, mine, user);
  }
  stream.wait();
}

OneDnnKernels::OneDnnKernels(Arena arena, bool block_channels, Precision precision)
    : state_(std::make_unique<State>(std::move(arena), block_channels, precision == Precision::kBf16 ? kBf16 : kF32,
                                     precision == Precision::kFp16)) {
  cap_threads_at_limit();  // before any primitive is created: some pick their split when they are made
}
OneDnnKernels::~OneDnnKernels() = default;

}  // namespace pshard::models::cpu
