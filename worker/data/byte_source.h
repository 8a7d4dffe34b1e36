// Internal: sequential reading of a plain or gzip file with byte offsets for error messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pshard::data {

// Reads a file front to back; gzip files (magic 1f 8b) are decompressed on the
// fly by zlib, plain files are read as they are. offset() counts bytes of the
// (decompressed) content, which is what every error message reports:
//
//   ByteSource in("/data/train-images-idx3-ubyte.gz");
//   uint8_t header[16];
//   in.read_exact(header, 16, "IDX header");
//   // -> Error "/data/train-images-idx3-ubyte.gz: truncated at byte 12: expected 16 bytes of IDX header ..."
class ByteSource {
 public:
  explicit ByteSource(const std::string& path);  // Error when the file cannot be opened
  ~ByteSource();
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // Reads exactly n bytes or throws an Error naming the file, the byte offset
  // where the content ended and what was expected (`what`).
  void read_exact(void* dst, size_t n, const std::string& what);
  // Same, appending to *dst, which grows only as the bytes arrive: a header that announces
  // more than the file holds costs no more memory than the file (then the same Error).
  void read_exact_append(std::vector<uint8_t>* dst, size_t n, const std::string& what);
  // Reads up to n bytes; returns how many (0 at the end). Corrupt gzip -> Error.
  size_t read_some(void* dst, size_t n);
  // True when no byte is left (reads ahead one byte; use it at the end only).
  bool at_end();

  uint64_t offset() const { return offset_; }
  const std::string& path() const { return path_; }
  bool compressed() const { return compressed_; }

 private:
  [[noreturn]] void throw_truncated(uint64_t start, size_t n, const std::string& what);

  std::string path_;
  void* gz_ = nullptr;  // gzFile
  uint64_t offset_ = 0;
  bool compressed_ = false;
};

}  // namespace pshard::data
