// Host name and random identifiers (see host.h).
#include "common/util/host.h"

#include <sched.h>
#include <unistd.h>

#include <random>

namespace pshard {

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

int allowed_cpus() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 1;
  return CPU_COUNT(&allowed) > 0 ? CPU_COUNT(&allowed) : 1;
}

std::string random_hex(size_t bytes) {
  std::random_device rd;
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (size_t i = 0; i < bytes; ++i) {
    const unsigned v = rd() & 0xffu;
    out += kDigits[v >> 4];
    out += kDigits[v & 15u];
  }
  return out;
}

std::string new_job_token() { return random_hex(16); }

}  // namespace pshard
