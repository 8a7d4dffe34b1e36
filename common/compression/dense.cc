// check_dense: the length rule of the dense codecs.
#include "common/compression/dense.h"

namespace pshard::compression {

CheckResult check_dense(const char* name, size_t element_bytes, size_t bytes, size_t n) {
  if (bytes == n * element_bytes) return {};
  return {CheckResult::kWrongLength, std::string(name) + " payload of " + std::to_string(bytes) + " bytes, expected " +
                                         std::to_string(n * element_bytes) + " (" + std::to_string(n) + " values of " +
                                         std::to_string(element_bytes) + " bytes)"};
}

}  // namespace pshard::compression
