// The trained model's parameters and buffers (BatchNorm running statistics) in
// one file (RUN_DIR/model.bin), written at the end of `pshard train` and by
// worker 0 of a distributed run; train.init_from reads it back
// (model_init.h), and so does scripts/torch_to_pshard.py's read_model_file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pshard::models {
class Model;
}

namespace pshard::trainer {

// Layout (little endian): "PSHMODEL" | u32 version (1) | u32 tensor count |
// per tensor: u32 name length | name bytes | u32 ndims | i64 dims[ndims] |
// u64 numel | f32 data[numel]. Written to a temporary file, fsynced, then
// renamed, so a reader never sees half a file. The parameters come first, in
// Model::params() order, then the buffers in Model::buffers() order (each
// named as in PyTorch: "layer1.0.bn1.running_mean"; worker 0's own).
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

void save_model_file(models::Model& model, const std::string& path);
// Errors name the file and the byte offset of what is wrong.
std::vector<NamedTensor> load_model_file(const std::string& path);

}  // namespace pshard::trainer
