// The oneDNN kernels' shared machinery: engine, stream and running a primitive on plain tensors via the arena.
#include <unordered_map>
#include <utility>

#include "models/cpu/onednn_state.h"

namespace pshard::models::cpu {
namespace {
constexpr size_t kAlign = 64;  // bytes; oneDNN's JIT kernels want cache-line aligned buffers
}  // namespace

OneDnnKernels::State::State(Arena a) : arena(std::move(a)) { attr.set_scratchpad_mode(dnnl::scratchpad_mode::user); }

void OneDnnKernels::State::run(const dnnl::primitive& p, const memory::desc& scratchpad, const std::vector<Arg>& args) {
  size_t bytes = 0;
  auto take = [&](size_t n) {
    size_t at = bytes;
    bytes += (n + kAlign - 1) / kAlign * kAlign;
    return at;
  };
  std::vector<size_t> offsets(args.size(), 0);
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].want != args[i].plain) offsets[i] = take(args[i].want.get_size());
  }
  const size_t scratch_at = take(scratchpad.get_size());
  char* base = reinterpret_cast<char*>(arena(static_cast<int64_t>(bytes / sizeof(float)) + 1));

  std::unordered_map<int, memory> exec_args;
  std::vector<std::pair<memory, memory>> write_back;  // (primitive's, caller's)
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& a = args[i];
    memory user(a.plain, engine, a.data);
    if (a.want == a.plain) {
      exec_args.emplace(a.id, user);
      continue;
    }
    memory mine(a.want, engine, base + offsets[i]);
    if (a.output) {
      write_back.emplace_back(mine, user);
    } else {
      dnnl::reorder(user, mine).execute(stream, user, mine);
    }
    exec_args.emplace(a.id, mine);
  }
  exec_args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratchpad, engine, base + scratch_at));
  p.execute(stream, exec_args);
  for (auto& [mine, user] : write_back) dnnl::reorder(mine, user).execute(stream, mine, user);
  stream.wait();
}

OneDnnKernels::OneDnnKernels(Arena arena) : state_(std::make_unique<State>(std::move(arena))) {}
OneDnnKernels::~OneDnnKernels() = default;

}  // namespace pshard::models::cpu
