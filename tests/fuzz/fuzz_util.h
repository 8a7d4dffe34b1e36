// Helpers shared by the libFuzzer targets: reading a fuzz input in pieces, invariant checks, scratch files.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace pshard::fuzz {

// Consumes a fuzz input front to back; reads past the end yield zeros / short pieces.
//
//   FuzzInput in(data, size);
//   uint8_t flags = in.u8();
//   std::string frame = in.piece(in.u16());   // at most what is left
class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  std::string piece(size_t n) {
    n = std::min(n, left());
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  std::string rest() { return piece(left()); }
  size_t left() const { return size_ - pos_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// An invariant of the code under test is broken: report it and crash, so libFuzzer saves the input.
[[noreturn]] inline void invariant_failed(const char* what, const char* file, int line) {
  std::fprintf(stderr, "fuzz invariant failed at %s:%d: %s\n", file, line, what);
  std::abort();
}
#define PSHARD_FUZZ_REQUIRE(cond) ((cond) ? (void)0 : ::pshard::fuzz::invariant_failed(#cond, __FILE__, __LINE__))

// A scratch path on tmpfs, one per process and name, removed when the process exits:
// the file parsers read paths, and writing the input there costs microseconds.
inline const std::string& scratch_path(const char* name) {
  static const std::string path = [name] {
    const char* dir = std::getenv("PSHARD_FUZZ_TMP");
    std::string base = dir != nullptr ? dir : (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    return base + "/pshard-fuzz-" + name + "-" + std::to_string(getpid());
  }();
  static const bool registered = [] { return std::atexit([] { std::remove(path.c_str()); }) == 0; }();
  (void)registered;
  return path;
}

// Writes bytes to `path` (truncating); aborts when the scratch file cannot be written.
inline void write_file(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  PSHARD_FUZZ_REQUIRE(f != nullptr);
  size_t n = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), f);
  PSHARD_FUZZ_REQUIRE(n == bytes.size());
  PSHARD_FUZZ_REQUIRE(std::fclose(f) == 0);
}

}  // namespace pshard::fuzz
