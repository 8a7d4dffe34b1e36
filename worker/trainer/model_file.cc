// Writing and reading model.bin.
#include "worker/trainer/model_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "common/error.h"
#include "models/backend.h"
#include "models/model.h"

namespace pshard::trainer {
namespace {

constexpr char kMagic[8] = {'P', 'S', 'H', 'M', 'O', 'D', 'E', 'L'};
constexpr uint32_t kVersion = 1;

template <typename T>
void put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

class Reader {
 public:
  Reader(const std::string& path, const std::string& bytes) : path_(path), bytes_(bytes) {}
  template <typename T>
  T get(const char* what) {
    T v;
    need(sizeof v, what);
    std::memcpy(&v, bytes_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  void read(void* dst, size_t n, const char* what) {
    need(n, what);
    std::memcpy(dst, bytes_.data() + pos_, n);
    pos_ += n;
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(path_ + ": at byte " + std::to_string(pos_) + ": " + why);
  }
  bool at_end() const { return pos_ == bytes_.size(); }

 private:
  void need(size_t n, const char* what) const {
    if (bytes_.size() - pos_ < n) {
      fail(std::string("truncated: expected ") + std::to_string(n) + " bytes of " + what + ", " +
           std::to_string(bytes_.size() - pos_) + " left");
    }
  }
  const std::string& path_;
  const std::string& bytes_;
  size_t pos_ = 0;
};

}  // namespace

void save_model_file(models::Model& model, const std::string& path) {
  models::Backend& backend = model.backend();
  std::string out(kMagic, sizeof kMagic);
  put(&out, kVersion);
  put(&out, static_cast<uint32_t>(model.params().size()));
  for (const models::ParamRef& p : model.params()) {
    put(&out, static_cast<uint32_t>(p.name.size()));
    out += p.name;
    put(&out, static_cast<uint32_t>(p.shape.size()));
    for (int64_t d : p.shape) put(&out, d);
    put(&out, static_cast<uint64_t>(p.numel));
    const size_t bytes = static_cast<size_t>(p.numel) * sizeof(float);
    const size_t at = out.size();
    out.resize(at + bytes);
    if (backend.host_accessible()) {
      std::memcpy(&out[at], p.value, bytes);
    } else {
      backend.download(&out[at], p.value, bytes);
    }
  }
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw Error("cannot write " + tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::write(fd, out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      throw Error("cannot write " + tmp + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) throw Error("cannot write " + tmp + ": " + std::strerror(errno));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw Error("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  }
}

std::vector<NamedTensor> load_model_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Reader r(path, bytes);
  char magic[8];
  r.read(magic, sizeof magic, "magic");
  if (std::memcmp(magic, kMagic, sizeof magic) != 0) r.fail("not a pshard model file (bad magic)");
  if (uint32_t v = r.get<uint32_t>("version"); v != kVersion) r.fail("unsupported version " + std::to_string(v));
  const uint32_t count = r.get<uint32_t>("tensor count");
  std::vector<NamedTensor> tensors;
  for (uint32_t i = 0; i < count; ++i) {
    NamedTensor t;
    const uint32_t name_len = r.get<uint32_t>("name length");
    if (name_len > 4096) r.fail("name length " + std::to_string(name_len) + " is implausible");
    t.name.resize(name_len);
    r.read(&t.name[0], name_len, "name");
    const uint32_t ndims = r.get<uint32_t>("ndims");
    if (ndims > 8) r.fail("tensor " + t.name + " has " + std::to_string(ndims) + " dimensions");
    uint64_t product = 1;
    for (uint32_t d = 0; d < ndims; ++d) {
      int64_t dim = r.get<int64_t>("dims");
      if (dim <= 0) r.fail("tensor " + t.name + " has dimension " + std::to_string(dim));
      t.shape.push_back(dim);
      product *= static_cast<uint64_t>(dim);
    }
    const uint64_t numel = r.get<uint64_t>("numel");
    if (numel != product) r.fail("tensor " + t.name + ": numel " + std::to_string(numel) + " != product of dims");
    t.data.resize(numel);
    r.read(t.data.data(), numel * sizeof(float), "tensor data");
    tensors.push_back(std::move(t));
  }
  if (!r.at_end()) r.fail("unexpected bytes after the last tensor");
  return tensors;
}

}  // namespace pshard::trainer
