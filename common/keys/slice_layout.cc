// The slice cut, the largest-first balancer and the layout fingerprint.
#include "common/keys/slice_layout.h"

#include <algorithm>
#include <numeric>

#include "common/error.h"

namespace pshard {
namespace {

class Fnv1a {
 public:
  void bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
      h_ ^= p[i];
      h_ *= 0x100000001b3ULL;
    }
  }
  void u64(uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
    bytes(b, 8);
  }
  void str(const std::string& s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

}  // namespace

SliceLayout::SliceLayout(std::vector<TensorSpec> tensors, uint64_t slice_bytes, uint32_t num_servers)
    : tensors_(std::move(tensors)), slice_bytes_(slice_bytes), num_servers_(num_servers) {
  if (tensors_.empty()) throw Error("slice layout: the model has no tensors");
  if (slice_bytes_ < sizeof(float)) {
    throw Error("slice layout: slice_bytes must be >= 4, got " + std::to_string(slice_bytes_));
  }
  if (num_servers_ == 0) throw Error("slice layout: the number of servers must be >= 1");
  const uint64_t per_slice = slice_elements();
  // Count first, so that a tensor list from the wire cannot make us allocate without bound.
  uint64_t total = 0;
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const TensorSpec& spec = tensors_[t];
    if (spec.name.empty()) throw Error("slice layout: tensor " + std::to_string(t) + " has an empty name");
    if (spec.numel == 0) throw Error("slice layout: tensor '" + spec.name + "' has 0 elements");
    const uint64_t count = spec.numel / per_slice + (spec.numel % per_slice != 0);  // no overflow near 2^64
    total += std::min(count, kMaxSlices + 1);
    if (total > kMaxSlices) {
      throw Error("slice layout: with tensor '" + spec.name + "' the model needs more than " +
                  std::to_string(kMaxSlices) + " slices of " + std::to_string(slice_bytes_) +
                  " bytes; raise cluster.slice_bytes");
    }
  }
  slices_.reserve(total);
  first_slice_.reserve(tensors_.size() + 1);
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const TensorSpec& spec = tensors_[t];
    if (!ids_.emplace(spec.name, static_cast<uint32_t>(t)).second)
      throw Error("slice layout: tensor name '" + spec.name + "' appears twice");
    first_slice_.push_back(static_cast<uint32_t>(slices_.size()));
    const uint64_t count = spec.numel / per_slice + (spec.numel % per_slice != 0);
    for (uint64_t s = 0; s < count; ++s) {
      SliceInfo info;
      info.tensor = static_cast<uint32_t>(t);
      info.slice = static_cast<uint32_t>(s);
      info.offset = s * per_slice;
      info.length = std::min(per_slice, spec.numel - info.offset);
      slices_.push_back(info);
    }
  }
  first_slice_.push_back(static_cast<uint32_t>(slices_.size()));

  // Largest first onto the least-loaded server (ties: lowest rank). stable_sort keeps
  // (tensor, slice) order among equal sizes, so the result depends on the inputs only.
  std::vector<uint32_t> order(slices_.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return slices_[a].length > slices_[b].length; });
  server_bytes_.assign(num_servers_, 0);
  for (uint32_t id : order) {
    uint32_t best = 0;
    for (uint32_t s = 1; s < num_servers_; ++s) {
      if (server_bytes_[s] < server_bytes_[best]) best = s;
    }
    slices_[id].server = best;
    server_bytes_[best] += slices_[id].length * sizeof(float);
  }

  Fnv1a h;
  h.u64(slice_bytes_);
  h.u64(num_servers_);
  h.u64(tensors_.size());
  for (const TensorSpec& spec : tensors_) {
    h.str(spec.name);
    h.u64(spec.numel);
  }
  for (const SliceInfo& s : slices_) h.u64(s.server);
  fingerprint_ = h.value();
  if (fingerprint_ == 0) fingerprint_ = 1;  // 0 means "no layout" on the wire
}

int64_t SliceLayout::find(uint32_t tensor, uint32_t slice) const {
  if (tensor >= tensors_.size()) return -1;
  const uint64_t id = static_cast<uint64_t>(first_slice_[tensor]) + slice;
  if (id >= first_slice_[tensor + 1]) return -1;
  return static_cast<int64_t>(id);
}

uint32_t SliceLayout::tensor_id(const std::string& name) const {
  auto it = ids_.find(name);
  if (it != ids_.end()) return it->second;
  throw Error("unknown tensor '" + name + "' (the layout has " + std::to_string(tensors_.size()) + " tensors)");
}

std::vector<uint32_t> SliceLayout::slices_of(uint32_t tensor) const {
  if (tensor >= tensors_.size()) throw Error("unknown tensor id " + std::to_string(tensor));
  std::vector<uint32_t> ids;
  for (uint32_t id = first_slice_[tensor]; id < first_slice_[tensor + 1]; ++id) ids.push_back(id);
  return ids;
}

uint64_t SliceLayout::bytes_on_server(uint32_t rank) const {
  return rank < server_bytes_.size() ? server_bytes_[rank] : 0;
}

std::string SliceLayout::describe(uint32_t id) const {
  if (id >= slices_.size()) return "slice #" + std::to_string(id) + " (unknown)";
  const SliceInfo& s = slices_[id];
  return tensors_[s.tensor].name + "[slice " + std::to_string(s.slice) + "]";
}

}  // namespace pshard
