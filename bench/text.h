// printf into a std::string, for the benchmarks' text reports (format_kv_bench, format_compute_bench).
//
//   std::string text;
//   appendf(text, "  push+pull      %.3f GB/s\n", gbps);
#pragma once

#include <string>

namespace pshard::bench {

// Appends the printf-formatted text to `out`.
__attribute__((format(printf, 2, 3))) void appendf(std::string& out, const char* format, ...);

}  // namespace pshard::bench
