// Names of the compute precisions (train.precision).
#include "models/precision.h"

#include "common/error.h"

namespace pshard::models {

Precision precision_from_name(const std::string& name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  if (name == "fp16") return Precision::kFp16;
  throw Error("train.precision must be fp32, bf16 or fp16, got '" + name + "'");
}

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
    case Precision::kFp32: break;
  }
  return "fp32";
}

}  // namespace pshard::models
