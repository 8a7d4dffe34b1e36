// Settings::from_config: the schema has checked each key's choices and range already.
#include "common/compression/settings.h"

#include "common/config/config.h"
#include "common/error.h"

namespace pshard::compression {

Settings Settings::from_config(const Config& cfg) {
  Settings s;
  const std::string push = cfg.get_string("cluster.compression");
  const std::string pull = cfg.get_string("cluster.pull_precision");
  if (!encoding_from_name(push, &s.push)) throw Error("cluster.compression: unknown codec '" + push + "'");
  if (pull == "fp32") {
    s.pull = Encoding::NONE;
  } else if (!encoding_from_name(pull, &s.pull) || (s.pull != Encoding::FP16 && s.pull != Encoding::BF16)) {
    throw Error("cluster.pull_precision: '" + pull + "' is not fp32, fp16 or bf16");
  }
  s.ratio = cfg.get_double("cluster.compression_ratio");
  s.error_feedback = cfg.get_bool("cluster.error_feedback");
  s.min_bytes = static_cast<uint64_t>(cfg.get_int("cluster.compression_min_bytes"));
  return s;
}

}  // namespace pshard::compression
