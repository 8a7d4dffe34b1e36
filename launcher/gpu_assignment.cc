// Which GPU each worker of a host gets (gpu_assignment.h).
#include "launcher/gpu_assignment.h"

#include <filesystem>
#include <system_error>

namespace pshard {

std::vector<std::string> host_gpus(const char* cuda_visible_devices, int64_t gpu_count) {
  std::vector<std::string> gpus;
  if (cuda_visible_devices) {
    const std::string list = cuda_visible_devices;
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      if (comma > start) gpus.push_back(list.substr(start, comma - start));
      start = comma + 1;
    }
    return gpus;
  }
  for (int64_t g = 0; g < gpu_count; ++g) gpus.push_back(std::to_string(g));
  return gpus;
}

std::string gpu_for_local_rank(const std::vector<std::string>& gpus, int64_t local_rank) {
  if (gpus.empty() || local_rank < 0) return "";
  return gpus[static_cast<size_t>(local_rank) % gpus.size()];
}

int64_t count_nvidia_gpus(const std::string& proc_dir) {
  std::error_code ec;
  int64_t n = 0;
  for (std::filesystem::directory_iterator it(proc_dir, ec), end; !ec && it != end; it.increment(ec)) ++n;
  return n;
}

}  // namespace pshard
