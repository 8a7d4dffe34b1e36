// The build's CUDA architectures against a GPU's compute capability (see cuda_arch.h).
#include "models/cuda_arch.h"

#include <cstdlib>
#include <sstream>

namespace pshard::models {

std::string cuda_arch_mismatch(int major, int minor, const std::string& build_archs) {
  const int device = major * 10 + minor;
  std::string list = build_archs;
  for (char& c : list) c = c == ',' ? ';' : c;  // the build's own list comes with commas
  std::istringstream in(list);
  for (std::string entry; std::getline(in, entry, ';');) {
    if (entry.empty()) continue;
    const size_t dash = entry.find('-');
    const std::string number = entry.substr(0, dash);
    const std::string kind = dash == std::string::npos ? "" : entry.substr(dash + 1);
    char* end = nullptr;
    const long arch = std::strtol(number.c_str(), &end, 10);
    if (number.empty() || *end != '\0' || arch <= 0) continue;
    const bool real = kind.empty() || kind == "real";
    const bool virt = kind.empty() || kind == "virtual";
    if (real && arch / 10 == major && arch % 10 <= minor) return "";
    if (virt && arch <= device) return "";
  }
  return "this build has no code for compute capability " + std::to_string(major) + "." + std::to_string(minor) +
         " (built for " + (build_archs.empty() ? std::string("no CUDA architecture") : build_archs) +
         "): rebuild with -DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(device) +
         " (or a list that includes it; docs/LAYOUT.md, \"CUDA architectures\")";
}

std::string cuda_build_archs() {
#ifdef PSHARD_CUDA_ARCHS
  return PSHARD_CUDA_ARCHS;
#else
  return "";
#endif
}

}  // namespace pshard::models
