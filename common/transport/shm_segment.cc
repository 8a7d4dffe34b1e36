// Anonymous shared-memory segments and the slot table (see shm_segment.h).
#include "common/transport/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "common/util/stream_copy.h"

namespace pshard::transport {
namespace {

// The seals every segment carries from its creation: its size is fixed.
constexpr int kSizeSeals = F_SEAL_SHRINK | F_SEAL_GROW;

constexpr size_t kAlign = 64;

size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

SharedSegment::~SharedSegment() { reset(); }

SharedSegment::SharedSegment(SharedSegment&& other) noexcept : fd_(other.fd_), data_(other.data_), size_(other.size_) {
  other.fd_ = -1;
  other.data_ = nullptr;
  other.size_ = 0;
}

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.fd_;
    data_ = other.data_;
    size_ = other.size_;
    other.fd_ = -1;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void SharedSegment::reset() {
  if (data_ != nullptr) ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr;
  fd_ = -1;
  size_ = 0;
}

SharedSegment SharedSegment::create(const std::string& name, size_t bytes) {
  if (bytes == 0) throw Error("shared-memory segment '" + name + "': size 0");
  SharedSegment s;
  s.fd_ = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (s.fd_ < 0) throw Error("cannot create shared-memory segment '" + name + "': " + std::strerror(errno));
  if (::ftruncate(s.fd_, static_cast<off_t>(bytes)) != 0) {
    throw Error("cannot size shared-memory segment '" + name + "' to " + std::to_string(bytes) +
                " bytes: " + std::strerror(errno));
  }
  if (::fcntl(s.fd_, F_ADD_SEALS, kSizeSeals) != 0) {
    throw Error("cannot seal shared-memory segment '" + name + "' against resizing: " + std::strerror(errno));
  }
  s.data_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd_, 0);
  if (s.data_ == MAP_FAILED) {
    s.data_ = nullptr;
    throw Error("cannot map shared-memory segment '" + name + "': " + std::strerror(errno));
  }
  s.size_ = bytes;
  return s;
}

void SharedSegment::seal_against_other_writers() {
  if (::fcntl(fd_, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) != 0) {
    throw Error(std::string("cannot seal a shared-memory segment against other writers: ") + std::strerror(errno));
  }
}

SharedSegment SharedSegment::attach(int fd, size_t expected_bytes, const std::string& what, Access access) {
  SharedSegment s;
  s.fd_ = fd;
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(what + ": cannot stat the segment: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    throw Error(what + ": not a shared-memory segment of this user (uid " + std::to_string(st.st_uid) + ")");
  }
  if (static_cast<uint64_t>(st.st_size) != expected_bytes) {
    throw Error(what + " has " + std::to_string(st.st_size) + " bytes, the layout needs exactly " +
                std::to_string(expected_bytes) + ": refused (" +
                (static_cast<uint64_t>(st.st_size) < expected_bytes ? "truncated" : "oversized") + ")");
  }
  // Another process could otherwise truncate it under the owner (an access past the end faults: SIGBUS).
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & kSizeSeals) != kSizeSeals) {
    throw Error(what + ": the segment is not sealed against resizing (seals " + std::to_string(seals) + "): refused");
  }
  const int prot = access == Access::kReadOnly ? PROT_READ : PROT_READ | PROT_WRITE;
  s.data_ = ::mmap(nullptr, expected_bytes, prot, MAP_SHARED, fd, 0);
  if (s.data_ == MAP_FAILED) {
    s.data_ = nullptr;
    throw Error(what + ": cannot map it: " + std::strerror(errno));
  }
  s.size_ = expected_bytes;
  return s;
}

SlotTable::SlotTable(const SliceLayout& layout, uint32_t server) : offset_(layout.slices().size(), -1) {
  size_t at = 0;
  for (uint32_t id = 0; id < layout.slices().size(); ++id) {
    const SliceInfo& s = layout.slice(id);
    if (s.server != server && server != kEverySlice) continue;
    offset_[id] = static_cast<int64_t>(at);
    at += sizeof(SlotHead) + aligned(s.length * sizeof(float));
    ++slots_;
  }
  bytes_ = at;
}

SlotTable SlotTable::every_slice(const SliceLayout& layout) { return SlotTable(layout, kEverySlice); }

SlotHead* SlotTable::head(uint8_t* base, uint32_t id) const {
  if (id >= offset_.size() || offset_[id] < 0) return nullptr;
  return reinterpret_cast<SlotHead*>(base + offset_[id]);
}

}  // namespace pshard::transport
