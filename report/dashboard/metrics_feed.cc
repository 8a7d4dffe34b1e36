#include "report/dashboard/metrics_feed.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace pshard::report::dashboard {
namespace {

// Closes the descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string id_of(const struct stat& st) {
  return std::to_string(static_cast<uint64_t>(st.st_dev)) + ":" + std::to_string(static_cast<uint64_t>(st.st_ino));
}

}  // namespace

FeedChunk read_metrics_feed(const std::string& path, uint64_t from, const std::string& file_id, size_t max_bytes) {
  FeedChunk c;
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) {
    if (errno == ENOENT) {  // the job has not written its first line yet
      c.reset = from != 0 || !file_id.empty();
      return c;
    }
    throw Error("dashboard: cannot open " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw Error("dashboard: cannot stat " + path + ": " + std::strerror(errno));
  c.file_id = id_of(st);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if ((!file_id.empty() && file_id != c.file_id) || from > size || (file_id.empty() && from != 0)) {
    c.reset = true;
    from = 0;
  }
  c.next = from;
  // The whole lines within max_bytes; when not even one fits, read on to the end of the first.
  std::string buf;
  uint64_t at = from;
  size_t want = std::max<size_t>(max_bytes, 1);
  size_t end = std::string::npos;
  while (at < size && end == std::string::npos) {
    const size_t first = buf.size();
    const size_t n = static_cast<size_t>(std::min<uint64_t>(want, size - at));
    buf.resize(first + n);
    const ssize_t got = ::pread(f.fd, buf.data() + first, n, static_cast<off_t>(at));
    if (got < 0 && errno == EINTR) {
      buf.resize(first);
      continue;
    }
    if (got < 0) throw Error("dashboard: cannot read " + path + ": " + std::strerror(errno));
    buf.resize(first + static_cast<size_t>(got));
    if (got == 0) break;  // the file shrank under us: take what there is
    at += static_cast<uint64_t>(got);
    end = first == 0 ? buf.rfind('\n') : buf.find('\n', first);
    want = 64 * 1024;
  }
  if (end == std::string::npos) return c;  // no whole line yet: the writer is in the middle of one
  buf.resize(end + 1);
  c.next = from + buf.size();
  c.lines = std::move(buf);
  return c;
}

}  // namespace pshard::report::dashboard
