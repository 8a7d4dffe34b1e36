// Bounds-checked binary reading and atomic whole-file replacement.
#include "common/util/binary_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "common/error.h"

namespace pshard::binary {

void put_string(std::string& out, const std::string& s) {
  put<uint32_t>(out, static_cast<uint32_t>(s.size()));
  out += s;
}

void put_floats(std::string& out, const float* v, size_t n) {
  out.append(reinterpret_cast<const char*>(v), n * sizeof(float));
}

void Reader::fail(const std::string& why) const {
  throw Error(label_ + ": " + why + " (at byte offset " + std::to_string(pos_) + ")");
}

void Reader::need(uint64_t n, const char* what) const {
  if (n > bytes_.size() - pos_) {
    fail(std::string("truncated: ") + what + " needs " + std::to_string(n) + " more bytes, the file has " +
         std::to_string(bytes_.size() - pos_) + " left");
  }
}

void Reader::read(void* dst, uint64_t n, const char* what) {
  need(n, what);
  if (n > 0) std::memcpy(dst, bytes_.data() + pos_, n);
  pos_ += n;
}

std::string Reader::get_string(const char* what, uint32_t max_bytes) {
  const uint32_t n = get<uint32_t>(what);
  if (n > max_bytes) fail(std::string(what) + " claims " + std::to_string(n) + " bytes");
  need(n, what);
  std::string s = bytes_.substr(pos_, n);
  pos_ += n;
  return s;
}

void Reader::get_floats(std::vector<float>* out, uint64_t n, const char* what) {
  if (n > (bytes_.size() - pos_) / sizeof(float)) need(n * sizeof(float), what);
  out->resize(n);
  read(out->data(), n * sizeof(float), what);
}

namespace {
const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}
}  // namespace

namespace {

// read_file and read_file_prefix: at most `limit` bytes; more than that is an Error when `whole` is set.
std::string read_regular(const std::string& path, const std::string& label, uint64_t limit, bool whole) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; only regular files are read, and never
  // more than the size they had when opened (a device such as /dev/zero never ends).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw Error(label + " " + path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string why = S_ISREG(st.st_mode) ? std::strerror(errno) : file_kind(st.st_mode);
    ::close(fd);
    throw Error(label + " " + path + ": not a regular file (" + why + "): refusing to read it");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (whole && size > limit) {
    ::close(fd);
    throw Error(label + " " + path + ": " + std::to_string(size) + " bytes, more than the " + std::to_string(limit) +
                " bytes a " + label + " may have: refusing to read it");
  }
  std::string bytes(static_cast<size_t>(std::min(size, limit)), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw Error(label + " " + path + ": read failed: " + why);
    }
    if (n == 0) break;  // it shrank while we read: what is there (the format checks catch a truncation)
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  bytes.resize(got);
  return bytes;
}

}  // namespace

std::string read_file(const std::string& path, const std::string& label, uint64_t max_bytes) {
  return read_regular(path, label, max_bytes, true);
}

std::string read_file_prefix(const std::string& path, const std::string& label, uint64_t n) {
  return read_regular(path, label, n, false);
}

void require_regular_file(const std::string& path, const std::string& label) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error(label + " " + path + ": cannot open: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    throw Error(label + " " + path + ": not a regular file (" + file_kind(st.st_mode) + "): refusing to read it");
  }
}

namespace {

enum class Publish { kReplace, kCreateOnly };

// The one implementation behind both writers: DIR/.NAME.tmp.PID, written whole and fsynced, then
// published under PATH (rename: replace; link: only if PATH does not exist yet), then DIR fsynced.
// Returns false only for kCreateOnly when PATH already existed (the temporary is removed).
bool publish_file(const std::string& path, const std::string& bytes, const std::string& label, mode_t mode,
                  Publish how) {
  const std::filesystem::path final_path(path);
  std::string dir = final_path.parent_path().string();
  if (dir.empty()) dir = ".";
  // The pid keeps two processes that write the same file (e.g. tasks on a shared file system) apart.
  const std::string tmp = dir + "/." + final_path.filename().string() + ".tmp." + std::to_string(::getpid());
  auto failed = [&](const std::string& step, const std::string& file) {
    return Error(label + " " + path + ": " + step + " " + file + " failed: " + std::strerror(errno));
  };
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(label + " " + path + ": cannot create " + dir + ": " + ec.message());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) throw failed("open", tmp);

  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Error e = failed("write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      throw e;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    Error e = failed("fsync", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    throw e;
  }
  ::close(fd);
  bool created = true;
  if (how == Publish::kReplace) {
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      Error e = failed("rename to " + path + " of", tmp);
      ::unlink(tmp.c_str());
      throw e;
    }
  } else {
    // link() fails with EEXIST if another process created PATH meanwhile: theirs stays.
    if (::link(tmp.c_str(), path.c_str()) != 0) {
      if (errno != EEXIST) {
        Error e = failed("link to " + path + " of", tmp);
        ::unlink(tmp.c_str());
        throw e;
      }
      created = false;
    }
    ::unlink(tmp.c_str());
  }
  // Published; syncing the directory makes it durable (best effort: some file systems refuse).
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return created;
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& bytes, const std::string& label, mode_t mode) {
  publish_file(path, bytes, label, mode, Publish::kReplace);
}

bool create_file_atomically(const std::string& path, const std::string& bytes, const std::string& label, mode_t mode) {
  return publish_file(path, bytes, label, mode, Publish::kCreateOnly);
}

}  // namespace pshard::binary
