// Little-endian binary files written whole and replaced atomically, read back with bounds checks.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace pshard::binary {

// Appending plain values to a byte string (this machine's byte order: little-endian on x86-64/arm64).
template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_string(std::string& out, const std::string& s);  // u32 length, then the bytes
void put_floats(std::string& out, const float* v, size_t n);

// Reads a file's bytes front to back. Every failure is an Error that starts with `label` and ends
// with the byte offset, e.g. "checkpoint /r/c.ckpt: truncated: the slice table needs 24 more bytes,
// the file has 3 left (at byte offset 112)". Sizes read from the file are checked against the bytes
// left before anything is allocated.
//
//   binary::Reader r("model file " + path, binary::read_file(path, "model file"));
//   if (r.get<uint32_t>("version") != 1) r.fail("unsupported version");
class Reader {
 public:
  Reader(std::string label, std::string bytes) : label_(std::move(label)), bytes_(std::move(bytes)) {}

  template <typename T>
  T get(const char* what) {
    T v;
    need(sizeof v, what);
    std::memcpy(&v, bytes_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  void read(void* dst, uint64_t n, const char* what);
  std::string get_string(const char* what, uint32_t max_bytes);  // as put_string wrote it
  void get_floats(std::vector<float>* out, uint64_t n, const char* what);
  size_t pos() const { return pos_; }
  size_t size() const { return bytes_.size(); }
  bool at_end() const { return pos_ == bytes_.size(); }
  const std::string& bytes() const { return bytes_; }
  [[noreturn]] void fail(const std::string& why) const;

 private:
  void need(uint64_t n, const char* what) const;
  std::string label_;
  std::string bytes_;
  size_t pos_ = 0;
};

// The whole file, if PATH is (or links to) a regular file: a directory, FIFO or device is an Error
// "<label> PATH: not a regular file (a FIFO): refusing to read it" (opening never blocks, and no
// more than the file's size is read); "<label> PATH: cannot open: <reason>" when it cannot be read;
// "<label> PATH: N bytes, more than the M bytes a <label> may have" when it is larger than `max_bytes`.
// Every reader of a file a user may hand us goes through here (configs, metrics, traces, key files).
//
//   std::istringstream lines(binary::read_file(path, "metrics file", binary::kMaxTextFileBytes));
inline constexpr uint64_t kMaxTextFileBytes = uint64_t{4} << 30;  // metrics and trace files: 4 GiB
std::string read_file(const std::string& path, const std::string& label, uint64_t max_bytes = UINT64_MAX);
// The first `n` bytes (fewer when the file is shorter), with read_file's refusals of what is not a regular file.
std::string read_file_prefix(const std::string& path, const std::string& label, uint64_t n);
// For files read in pieces (data sets): an Error as read_file's unless PATH is (or links to) a regular
// file; "<label> PATH: cannot open: <reason>" when it does not exist. Never blocks.
void require_regular_file(const std::string& path, const std::string& label);

// Replaces PATH with `bytes` so that a crash leaves either the old file or the new one: writes
// DIR/.NAME.tmp.PID created with permissions `mode` (less the umask; 0600 for secrets: never
// readable by others, not even for a moment), fsyncs it, renames it over PATH and fsyncs DIR (creating DIR if needed).
// Errors start with `label` and name the step that failed. The one atomic writer of the project: checkpoints, model
// files, config.toml, cluster.json, key and token files.
void write_file_atomically(const std::string& path, const std::string& bytes, const std::string& label,
                           mode_t mode = 0644);
// The same, but PATH is only created, never replaced: returns false (and leaves PATH as it is) when
// it exists already, e.g. because another task created it first. For files all tasks must share.
bool create_file_atomically(const std::string& path, const std::string& bytes, const std::string& label,
                            mode_t mode = 0644);

}  // namespace pshard::binary
