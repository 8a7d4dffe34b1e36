// libFuzzer target: the TOML config loader, schema validation and --set overrides.
//
// Input: TOML text, optionally followed by a line "%%" and then one "section.key=value"
// override per line. Loading must succeed or throw pshard::Error; a loaded config must answer
// every getter of its schema type, and to_toml() (written into every run directory) must load
// back to the same values.
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/config/schema.h"
#include "common/error.h"
#include "tests/fuzz/fuzz_util.h"

using namespace pshard;

namespace {

void read_every_key(const Config& cfg) {
  for (const ConfigKey& k : config_schema()) {
    switch (k.type) {
      case ConfigType::kString: (void)cfg.get_string(k.key); break;
      case ConfigType::kInt: (void)cfg.get_int(k.key); break;
      case ConfigType::kDouble: (void)cfg.get_double(k.key); break;
      case ConfigType::kBool: (void)cfg.get_bool(k.key); break;
      case ConfigType::kIntList: (void)cfg.get_int_list(k.key); break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  const size_t split = text.find("\n%%\n");
  if (split != std::string::npos) {
    std::string rest = text.substr(split + 4);
    text.resize(split + 1);
    size_t start = 0;
    while (start <= rest.size() && overrides.size() < 16) {
      size_t end = rest.find('\n', start);
      if (end == std::string::npos) end = rest.size();
      if (end > start) overrides.push_back(rest.substr(start, end - start));
      start = end + 1;
    }
  }
  Config cfg = Config::defaults();
  try {
    cfg = Config::from_string(text, "fuzz.toml", overrides);
  } catch (const Error& e) {
    PSHARD_FUZZ_REQUIRE(e.what()[0] != '\0');
    return 0;
  }
  read_every_key(cfg);
  const std::string written = cfg.to_toml();
  Config back = Config::defaults();
  try {
    back = Config::from_string(written, "run/config.toml");
  } catch (const Error& e) {
    std::fprintf(stderr, "to_toml() output does not load: %s\n%s", e.what(), written.c_str());
    PSHARD_FUZZ_REQUIRE(!"to_toml() output loads back");
  }
  PSHARD_FUZZ_REQUIRE(back.to_toml() == written);
  return 0;
}
