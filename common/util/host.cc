// Host name and random identifiers (see host.h).
#include "common/util/host.h"

#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <random>

namespace pshard {

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

std::string host_locality() {
  std::string boot = "unknown-boot";
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char buf[64] = {0};
    if (std::fgets(buf, sizeof buf, f) != nullptr) {
      boot = buf;
      while (!boot.empty() && (boot.back() == '\n' || boot.back() == ' ')) boot.pop_back();
    }
    std::fclose(f);
  }
  char ns[128] = {0};
  const ssize_t n = ::readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  return boot + "/" + (n > 0 ? std::string(ns, static_cast<size_t>(n)) : host_name());
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
