// Tensor slices and their servers: how a model's parameters are cut and spread over S servers.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace pshard {

// One named parameter tensor of a model (float32 elements).
struct TensorSpec {
  std::string name;  // "fc1.weight"; unique within the model
  uint64_t numel = 0;
};

// One slice: elements [offset, offset + length) of tensor `tensor`, held by server `server`.
struct SliceInfo {
  uint32_t tensor = 0;  // index in the tensor list
  uint32_t slice = 0;   // index within the tensor
  uint64_t offset = 0;  // first element within the tensor
  uint64_t length = 0;  // elements
  uint32_t server = 0;  // owning server rank
};

// The deterministic cut and assignment every node computes from the same inputs.
// Tensors are cut into slices of at most slice_bytes (the last slice of a tensor
// holds the remainder); slices go largest first onto the server with the fewest
// bytes so far (ties: lower rank; equal sizes: tensor then slice order).
//
//   SliceLayout layout({{"fc1.weight", 784 * 256}, {"fc1.bias", 256}}, 1 << 20, /*num_servers=*/2);
//   for (uint32_t i : layout.slices_of("fc1.weight")) send(layout.slice(i).server, ...);
//   ClusterClient::Options opt; opt.layout_fingerprint = layout.fingerprint();
class SliceLayout {
 public:
  // The most slices a layout holds: 256 GiB of float32 at the default 1 MiB slices (a server keeps
  // state per slice; a bigger model needs a larger cluster.slice_bytes). Also bounds what an init
  // message from the wire can make a server allocate and sort.
  static constexpr uint64_t kMaxSlices = uint64_t(1) << 18;

  SliceLayout() = default;
  // Throws pshard::Error on an empty list, an empty or duplicate name, a tensor with 0 elements,
  // slice_bytes < 4, num_servers == 0 or more than kMaxSlices slices.
  SliceLayout(std::vector<TensorSpec> tensors, uint64_t slice_bytes, uint32_t num_servers);

  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  uint64_t slice_bytes() const { return slice_bytes_; }
  uint64_t slice_elements() const { return slice_bytes_ / sizeof(float); }
  uint32_t num_servers() const { return num_servers_; }

  // All slices in (tensor, slice) order; a slice's position here is its global slice id.
  const std::vector<SliceInfo>& slices() const { return slices_; }
  const SliceInfo& slice(uint32_t id) const { return slices_[id]; }
  // The global id of (tensor, slice), or -1 when it does not exist.
  int64_t find(uint32_t tensor, uint32_t slice) const;
  // Tensor id of `name`; throws pshard::Error naming it when unknown.
  uint32_t tensor_id(const std::string& name) const;
  // Global ids of the slices of one tensor, in slice order.
  std::vector<uint32_t> slices_of(uint32_t tensor) const;
  std::vector<uint32_t> slices_of(const std::string& name) const { return slices_of(tensor_id(name)); }
  // Bytes held by server `rank`.
  uint64_t bytes_on_server(uint32_t rank) const;
  // A 64-bit hash of tensor names, sizes, slice_bytes, S and the assignment (FNV-1a).
  uint64_t fingerprint() const { return fingerprint_; }
  // "fc1.weight[slice 3]" for messages.
  std::string describe(uint32_t id) const;

 private:
  std::vector<TensorSpec> tensors_;
  std::unordered_map<std::string, uint32_t> ids_;
  uint64_t slice_bytes_ = 0;
  uint32_t num_servers_ = 0;
  std::vector<SliceInfo> slices_;
  std::vector<uint32_t> first_slice_;  // per tensor: global id of its slice 0, plus a sentinel
  std::vector<uint64_t> server_bytes_;
  uint64_t fingerprint_ = 0;
};

}  // namespace pshard
