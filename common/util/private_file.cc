// Reading a file only its owner controls (common/util/private_file.h).
#include "common/util/private_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/error.h"

namespace pshard {
namespace {

// Closes the descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string mode_string(unsigned mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777u);
  return buf;
}

std::string read_private_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  const std::string name = what + " " + path;
  // Anyone who can write the directory can replace the file with one of their own between two looks.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0 && (st.st_mode & S_IWOTH) != 0) {
    throw Error(name + ": its directory " + dir + " has mode " + mode_string(st.st_mode) +
                ": anyone can replace the file in it; refusing to use it (chmod o-w " + dir + ")");
  }
  // O_NOFOLLOW: a symbolic link is refused rather than followed; O_NONBLOCK: opening a FIFO does not wait for a
  // writer (it is refused below as not a regular file).
  Fd f{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) {
    if (errno == ELOOP) throw Error(name + " is a symbolic link: refusing to use it");
    throw Error(name + ": " + std::strerror(errno));
  }
  if (::fstat(f.fd, &st) != 0) throw Error(name + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw Error(name + " is not a regular file: refusing to use it");
  if (st.st_uid != ::geteuid()) {
    throw Error(name + " is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
                std::to_string(::geteuid()) + "): refusing to use it");
  }
  if ((st.st_mode & 077) != 0) {
    throw Error(name + " has mode " + mode_string(st.st_mode) +
                ": group or others may read or change it; refusing to use it (chmod 600 " + path + ")");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    throw Error(name + " is " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(max_bytes) +
                " such a file may have");
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(f.fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(name + ": " + std::strerror(errno));
    if (n == 0) break;  // shrank while read: what is there
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

}  // namespace pshard
