// Writing and reading model.bin.
#include "worker/trainer/model_file.h"

#include <cstring>

#include "common/error.h"
#include "common/util/binary_file.h"
#include "models/backend.h"
#include "models/model.h"

namespace pshard::trainer {
namespace {

constexpr char kMagic[8] = {'P', 'S', 'H', 'M', 'O', 'D', 'E', 'L'};
constexpr uint32_t kVersion = 1;

}  // namespace

void save_model_file(models::Model& model, const std::string& path) {
  models::Backend& backend = model.backend();
  std::string out(kMagic, sizeof kMagic);
  binary::put(out, kVersion);
  const std::vector<models::BufferRef> buffers = model.buffers();
  binary::put(out, static_cast<uint32_t>(model.params().size() + buffers.size()));
  auto put_tensor = [&](const std::string& name, const std::vector<int64_t>& shape, int64_t numel, const float* data) {
    binary::put_string(out, name);
    binary::put(out, static_cast<uint32_t>(shape.size()));
    for (int64_t d : shape) binary::put(out, d);
    binary::put(out, static_cast<uint64_t>(numel));
    const size_t bytes = static_cast<size_t>(numel) * sizeof(float);
    const size_t at = out.size();
    out.resize(at + bytes);
    if (backend.host_accessible()) {
      std::memcpy(&out[at], data, bytes);
    } else {
      backend.download(&out[at], data, bytes);
    }
  };
  for (const models::ParamRef& p : model.params()) put_tensor(p.name, p.shape, p.numel, p.value);
  for (const models::BufferRef& b : buffers) put_tensor(b.name, b.shape, b.numel, b.value);
  binary::write_file_atomically(path, out, "model file");
}

std::vector<NamedTensor> load_model_file(const std::string& path) {
  binary::Reader r("model file " + path, binary::read_file(path, "model file"));
  char magic[8];
  r.read(magic, sizeof magic, "magic");
  if (std::memcmp(magic, kMagic, sizeof magic) != 0) r.fail("not a pshard model file (bad magic)");
  if (uint32_t v = r.get<uint32_t>("version"); v != kVersion) r.fail("unsupported version " + std::to_string(v));
  const uint32_t count = r.get<uint32_t>("tensor count");
  std::vector<NamedTensor> tensors;
  for (uint32_t i = 0; i < count; ++i) {
    NamedTensor t;
    t.name = r.get_string("a tensor name", 4096);
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
    r.get_floats(&t.data, numel, "tensor data");
    tensors.push_back(std::move(t));
  }
  if (!r.at_end()) r.fail("unexpected bytes after the last tensor");
  return tensors;
}

}  // namespace pshard::trainer
