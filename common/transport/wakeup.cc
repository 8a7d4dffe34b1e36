// eventfd-based wakeup of a polling loop.
#include "common/transport/wakeup.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/error.h"

namespace pshard::transport {

Wakeup::Wakeup() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd_ < 0) throw Error(std::string("eventfd failed: ") + std::strerror(errno));
}

Wakeup::~Wakeup() {
  if (fd_ >= 0) close(fd_);
}

void Wakeup::notify() {
  uint64_t one = 1;
  // EAGAIN means the counter is saturated: the loop is woken anyway.
  ssize_t n = write(fd_, &one, sizeof one);
  (void)n;
}

void Wakeup::drain() {
  uint64_t value = 0;
  ssize_t n = read(fd_, &value, sizeof value);
  (void)n;
}

}  // namespace pshard::transport
