// Internal: sequential plain/gzip reading with byte offsets (zlib's gzread reads both).
#include "worker/data/byte_source.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/util/binary_file.h"

namespace pshard::data {

ByteSource::ByteSource(const std::string& path) : path_(path) {
  binary::require_regular_file(path, "data file");  // a FIFO would block gzopen, a device never end
  {
    std::ifstream probe(path, std::ios::binary);
    if (!probe) throw Error(path + ": cannot open: " + std::strerror(errno));
    unsigned char magic[2] = {0, 0};
    probe.read(reinterpret_cast<char*>(magic), 2);
    compressed_ = probe.gcount() == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  }
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw Error(path + ": cannot open: " + std::strerror(errno));
  gzbuffer(f, 1 << 20);
  gz_ = f;
}

ByteSource::~ByteSource() {
  if (gz_ != nullptr) gzclose(static_cast<gzFile>(gz_));
}

size_t ByteSource::read_some(void* dst, size_t n) {
  gzFile f = static_cast<gzFile>(gz_);
  size_t done = 0;
  char* out = static_cast<char*>(dst);
  while (done < n) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    int got = gzread(f, out + done, chunk);
    if (got < 0) {
      int code = 0;
      std::string msg = gzerror(f, &code);
      if (msg.rfind(path_ + ": ", 0) == 0) msg = msg.substr(path_.size() + 2);  // zlib prefixes the path
      throw Error(path_ + ": corrupt " + (compressed_ ? "gzip stream near compressed byte " : "file at byte ") +
                  std::to_string(static_cast<long long>(gzoffset(f))) + " (while reading uncompressed bytes from " +
                  std::to_string(offset_ + done) + "): " + msg);
    }
    if (got == 0) break;  // end of data (a gzip stream cut short: gzerror says Z_BUF_ERROR)
    done += static_cast<size_t>(got);
  }
  offset_ += done;
  return done;
}

void ByteSource::read_exact(void* dst, size_t n, const std::string& what) {
  uint64_t start = offset_;
  size_t got = read_some(dst, n);
  if (got == n) return;
  throw_truncated(start, n, what);
}

void ByteSource::read_exact_append(std::vector<uint8_t>* dst, size_t n, const std::string& what) {
  const uint64_t start = offset_;
  size_t chunk = size_t(64) << 10;  // doubles up to 16 MiB: small files stay cheap, big ones read in big pieces
  size_t done = 0;
  while (done < n) {
    const size_t want = std::min(chunk, n - done);
    chunk = std::min(chunk * 2, size_t(16) << 20);
    const size_t at = dst->size();
    dst->resize(at + want);
    const size_t got = read_some(dst->data() + at, want);
    done += got;
    if (got < want) {
      dst->resize(at + got);
      throw_truncated(start, n, what);
    }
  }
}

void ByteSource::throw_truncated(uint64_t start, size_t n, const std::string& what) {
  std::ostringstream msg;
  msg << path_ << ": truncated at byte " << offset_ << ": expected " << n << " bytes of " << what
      << " starting at byte " << start;
  int code = 0;
  gzerror(static_cast<gzFile>(gz_), &code);
  if (compressed_ && code == Z_BUF_ERROR) msg << " (the gzip stream ends early)";
  throw Error(msg.str());
}

bool ByteSource::at_end() {
  char c;
  if (read_some(&c, 1) == 0) {
    int code = 0;
    gzerror(static_cast<gzFile>(gz_), &code);
    if (compressed_ && code == Z_BUF_ERROR) {
      throw Error(path_ + ": truncated gzip stream: all " + std::to_string(offset_) +
                  " bytes of data are there but the stream's end (CRC trailer) is missing");
    }
    return true;
  }
  offset_ -= 1;  // report offsets of the byte that was there
  return false;
}

}  // namespace pshard::data
