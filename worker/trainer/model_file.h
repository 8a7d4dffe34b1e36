// The trained model's parameters in one file (RUN_DIR/model.bin), written at
// the end of `pshard train` and by worker 0 of a distributed run.
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
// renamed, so a reader never sees half a file.
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

void save_model_file(models::Model& model, const std::string& path);
// Errors name the file and the byte offset of what is wrong.
std::vector<NamedTensor> load_model_file(const std::string& path);

}  // namespace pshard::trainer
