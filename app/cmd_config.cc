// `pshard config`: lists every configuration key, or validates a config file.
#include <cstdio>

#include "app/command.h"
#include "common/config/config.h"
#include "common/config/schema.h"
#include "common/util/args.h"

namespace pshard::app {
namespace {

int run_config(const std::vector<std::string>& args) {
  ArgParser p("pshard config", "list every configuration key, or check a config file and print its values");
  p.add_flag(
      "list",
      "print every key with its type, default, range, whether a resume may change it and meaning (Markdown table)");
  p.add_option("check", "FILE", "validate FILE and print the resolved values as TOML");
  p.add_multi("set", "KEY=VALUE", "override a key before printing");
  if (!p.parse(args)) return 0;
  if (p.has("check")) {
    Config cfg = Config::from_file(p.get("check"), p.get_all("set"));
    std::fputs(cfg.to_toml().c_str(), stdout);
    return 0;
  }
  std::printf("| key | type | default | allowed | on resume | meaning |\n|---|---|---|---|---|---|\n");
  for (const ConfigKey& k : config_schema()) {
    const char* type = "";
    std::string allowed = k.choices;
    switch (k.type) {
      case ConfigType::kString: type = "string"; break;
      case ConfigType::kInt: type = "int"; break;
      case ConfigType::kDouble: type = "float"; break;
      case ConfigType::kBool: type = "bool"; break;
      case ConfigType::kIntList: type = "int list"; break;
    }
    if (k.type == ConfigType::kInt || k.type == ConfigType::kDouble || k.type == ConfigType::kIntList) {
      char buf[96];
      std::snprintf(buf, sizeof buf, k.max_open ? "%g .. %g (excluded)" : "%g .. %g", k.min, k.max);
      allowed = buf;
    }
    for (char& c : allowed) {
      if (c == '|') c = '/';
    }
    const char* resume = k.on_resume == OnResume::kMayChange ? "may change" : "fixed";
    std::printf("| `%s` | %s | `%s` | %s | %s | %s |\n", k.key, type, k.default_value, allowed.c_str(), resume, k.doc);
  }
  return 0;
}

}  // namespace

PSHARD_COMMAND(config, "list configuration keys or check a config file", run_config);

}  // namespace pshard::app
