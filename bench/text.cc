// printf into a std::string (bench/text.h).
#include "bench/text.h"

#include <cstdarg>
#include <cstdio>

namespace pshard::bench {

void appendf(std::string& out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  if (n > 0) {
    const size_t old = out.size();
    out.resize(old + static_cast<size_t>(n) + 1);  // vsnprintf writes the terminating NUL too
    std::vsnprintf(&out[old], static_cast<size_t>(n) + 1, format, args);
    out.resize(old + static_cast<size_t>(n));
  }
  va_end(args);
}

}  // namespace pshard::bench
