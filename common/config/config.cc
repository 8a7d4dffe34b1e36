// Loading, validating and reading configuration values.
#include "common/config/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/config/config_errors.h"
#include "common/config/job_shape.h"
#include "common/config/schema.h"
#include "common/error.h"
#include "common/util/binary_file.h"

namespace pshard {

void config_fail(const std::string& origin, const std::string& key, const std::string& why) {
  throw Error("config " + origin + ": key '" + key + "': " + why);
}

std::string config_double_text(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

[[noreturn]] void fail(const std::string& origin, const std::string& key, const std::string& why) {
  config_fail(origin, key, why);
}

std::string format_double(double v) { return config_double_text(v); }

void check_range(const ConfigKey& k, double v, const std::string& origin) {
  if (!in_range(k, v)) fail(origin, k.key, "value " + format_double(v) + " is out of range " + range_text(k));
}

// The update rules' own defaults, as torch.optim has them, for the keys a config leaves unset: the schema's defaults
// (lr 0.01, eps 1e-8, rho 0.9, weight_decay 0) are SGD's and Adam's, and a port of a script that relied on
// torch.optim.Adadelta's eps or RMSprop's alpha would otherwise train another rule. LAMB and LARS, which torch.optim
// lacks, keep the schema's.
struct RuleDefault {
  const char* rule;
  const char* key;
  const char* value;
};
constexpr RuleDefault kRuleDefaults[] = {
    {"adam", "optimizer.lr", "0.001"},           {"adamw", "optimizer.lr", "0.001"},
    {"adamw", "optimizer.weight_decay", "0.01"}, {"adagrad", "optimizer.eps", "1e-10"},
    {"adadelta", "optimizer.lr", "1.0"},         {"adadelta", "optimizer.eps", "1e-6"},
    {"rmsprop", "optimizer.rho", "0.99"},
};

std::string canonical_from_text(const ConfigKey& k, const std::string& raw, const std::string& origin);

// Defaults that follow another key (the rule's own defaults follow optimizer.name, above; train.loss_scaling = auto
// follows train.precision): a bf16 job (train.precision)
// pushes gradients and pulls weights as bfloat16 unless its config names their encodings, since its convolutions and
// GEMMs read bf16 operands and float32 on the wire would carry bits they drop. An fp16 job pulls fp16 weights for the
// same reason, but pushes float32 gradients: unscaled gradients below fp16's range (2^-24) would reach the servers as
// zeros. Resolved here, once, so that the run directory's config.toml (what the servers and workers load) says what the
// job does.
void apply_derived_defaults(std::map<std::string, std::string>& values,
                            const std::map<std::string, bool>& explicit_keys) {
  const std::string rule = values.at("optimizer.name");
  for (const RuleDefault& d : kRuleDefaults) {
    if (rule == d.rule && explicit_keys.count(d.key) == 0) {
      values[d.key] = canonical_from_text(*find_config_key(d.key), d.value, "<optimizer defaults>");
    }
  }
  // The embedding tables' rule (embedding.optimizer) has its own defaults too: its learning rate and eps are
  // optimizer.lr and optimizer.eps where the config set them, else that rule's (adagrad's eps 1e-10), written into
  // embedding.lr and embedding.eps so that config.toml, from which a resumed run reads, keeps them.
  const std::string table_rule = values.at("embedding.optimizer") == "same" ? rule : values.at("embedding.optimizer");
  for (const auto& [own, general] :
       {std::pair<std::string, std::string>{"embedding.lr", "optimizer.lr"}, {"embedding.eps", "optimizer.eps"}}) {
    if (explicit_keys.count(own) != 0) continue;
    std::string value = explicit_keys.count(general) ? values.at(general) : find_config_key(general)->default_value;
    for (const RuleDefault& d : kRuleDefaults) {
      if (table_rule == d.rule && general == d.key && explicit_keys.count(general) == 0) value = d.value;
    }
    values[own] = canonical_from_text(*find_config_key(own), value, "<embedding defaults>");
  }
  const std::string precision = values.at("train.precision");
  // train.loss_scaling = auto: dynamic loss scaling for fp16 (whose small gradients underflow without it), none else.
  if (values.at("train.loss_scaling") == "auto")
    values["train.loss_scaling"] = precision == "fp16" ? "dynamic" : "none";
  if (precision == "fp32") return;
  for (const char* key : {"cluster.compression", "cluster.pull_precision"}) {
    if (precision == "fp16" && std::string(key) == "cluster.compression") continue;
    if (explicit_keys.count(key) == 0) values[key] = precision;
  }
}

bool parse_int(const std::string& text, int64_t* out) {
  std::string t = trim(text);
  if (t.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (errno != 0 || end != t.c_str() + t.size()) return false;
  *out = v;
  return true;
}

bool parse_double(const std::string& text, double* out) {
  std::string t = trim(text);
  if (t.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (errno != 0 || end != t.c_str() + t.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

// Why `s` cannot be a string value (written back by to_toml() and into logs), or "" when it can:
// it must be UTF-8 without control characters.
std::string bad_string_reason(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", c);
      return std::string("a control character ") + hex + " at byte " + std::to_string(i);
    }
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    uint32_t cp = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    bool ok = len > 0 && i + len <= s.size();
    for (size_t j = 1; ok && j < len; ++j) {
      const auto b = static_cast<unsigned char>(s[i + j]);
      ok = (b >> 6) == 2;
      cp = (cp << 6) | (b & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8 either.
    if (ok && len > 1) {
      ok = cp >= (len == 2 ? 0x80u : len == 3 ? 0x800u : 0x10000u) && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
    }
    if (!ok) return "an invalid UTF-8 sequence at byte " + std::to_string(i);
    i += len;
  }
  return "";
}

// Validates `text` (from an override or a default) for key `k` and returns
// its canonical form.
std::string canonical_from_text(const ConfigKey& k, const std::string& raw, const std::string& origin) {
  std::string text = trim(raw);
  switch (k.type) {
    case ConfigType::kString: {
      if (std::string why = bad_string_reason(text); !why.empty()) fail(origin, k.key, "the string has " + why);
      std::string choices = k.choices;
      if (!choices.empty()) {
        std::string padded = "|" + choices + "|";
        if (padded.find("|" + text + "|") == std::string::npos) {
          fail(origin, k.key, "'" + text + "' is not one of " + choices);
        }
      }
      return text;
    }
    case ConfigType::kInt: {
      int64_t v = 0;
      if (!parse_int(text, &v)) fail(origin, k.key, "expected an integer, got '" + text + "'");
      check_range(k, static_cast<double>(v), origin);
      return std::to_string(v);
    }
    case ConfigType::kDouble: {
      double v = 0;
      if (!parse_double(text, &v)) fail(origin, k.key, "expected a number, got '" + text + "'");
      check_range(k, v, origin);
      return format_double(v);
    }
    case ConfigType::kBool: {
      if (text == "true" || text == "1") return "true";
      if (text == "false" || text == "0") return "false";
      fail(origin, k.key, "expected true or false, got '" + text + "'");
    }
    case ConfigType::kIntList: {
      std::string body = text;
      if (!body.empty() && body.front() == '[') body = body.substr(1);
      if (!body.empty() && body.back() == ']') body.pop_back();
      std::string canon = "[";
      std::stringstream items(body);
      std::string item;
      bool first = true;
      while (std::getline(items, item, ',')) {
        if (trim(item).empty()) continue;
        int64_t v = 0;
        if (!parse_int(item, &v)) fail(origin, k.key, "expected a list of integers, got '" + text + "'");
        check_range(k, static_cast<double>(v), origin);
        canon += (first ? "" : ", ") + std::to_string(v);
        first = false;
      }
      return canon + "]";
    }
  }
  fail(origin, k.key, "unsupported type");
}

const char* type_name(ConfigType t) {
  switch (t) {
    case ConfigType::kString: return "a string";
    case ConfigType::kInt: return "an integer";
    case ConfigType::kDouble: return "a number";
    case ConfigType::kBool: return "true or false";
    case ConfigType::kIntList: return "a list of integers";
  }
  return "?";
}

// Converts a TOML value node to the text form of its schema type, rejecting
// type mismatches (a string where a number belongs, 1.5 for an integer...).
std::string text_from_node(const ConfigKey& k, const toml::node& node, const std::string& origin) {
  auto wrong = [&]() -> std::string {
    std::ostringstream where;
    where << " (line " << node.source().begin.line << ")";
    fail(origin, k.key, std::string("expected ") + type_name(k.type) + where.str());
  };
  switch (k.type) {
    case ConfigType::kString:
      if (auto v = node.value<std::string>(); v && node.is_string()) return *v;
      return wrong();
    case ConfigType::kInt:
      if (node.is_integer()) return std::to_string(*node.value<int64_t>());
      return wrong();
    case ConfigType::kDouble:
      if (node.is_integer()) return std::to_string(*node.value<int64_t>());
      if (node.is_floating_point()) return format_double(*node.value<double>());
      return wrong();
    case ConfigType::kBool:
      if (node.is_boolean()) return *node.value<bool>() ? "true" : "false";
      return wrong();
    case ConfigType::kIntList: {
      const toml::array* arr = node.as_array();
      if (!arr) return wrong();
      std::string text = "[";
      for (size_t i = 0; i < arr->size(); ++i) {
        const toml::node& item = *arr->get(i);
        if (!item.is_integer()) return wrong();
        text += (i ? ", " : "") + std::to_string(*item.value<int64_t>());
      }
      return text + "]";
    }
  }
  return wrong();
}

void collect(const toml::table& table, const std::string& prefix, const std::string& origin,
             std::map<std::string, std::string>* values, std::map<std::string, bool>* explicit_keys) {
  for (const auto& [name, node] : table) {
    std::string key = prefix.empty() ? std::string(name.str()) : prefix + "." + std::string(name.str());
    if (const toml::table* sub = node.as_table()) {
      collect(*sub, key, origin, values, explicit_keys);
      continue;
    }
    const ConfigKey* k = find_config_key(key);
    if (!k) {
      std::ostringstream where;
      where << "unknown key (line " << node.source().begin.line << "); `pshard config --list` shows every key";
      fail(origin, key, where.str());
    }
    (*values)[key] = canonical_from_text(*k, text_from_node(*k, node, origin), origin);
    (*explicit_keys)[key] = true;
  }
}

}  // namespace

Config Config::defaults() {
  Config cfg;
  cfg.origin_ = "<defaults>";
  for (const ConfigKey& k : config_schema()) {
    cfg.values_[k.key] = canonical_from_text(k, k.default_value, "<schema>");
  }
  return cfg;
}

Config Config::from_string(const std::string& toml_text, const std::string& origin,
                           const std::vector<std::string>& overrides) {
  Config cfg = defaults();
  cfg.origin_ = origin;
  toml::table table;
  try {
    table = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << "config " << origin << ": line " << e.source().begin.line << ", column " << e.source().begin.column << ": "
        << e.description();
    throw Error(msg.str());
  }
  collect(table, "", origin, &cfg.values_, &cfg.explicit_);
  for (const std::string& o : overrides) cfg.set(o);
  apply_derived_defaults(cfg.values_, cfg.explicit_);
  check_job_rules(cfg, origin);
  return cfg;
}

Config Config::from_file(const std::string& path, const std::vector<std::string>& overrides) {
  // A FIFO, a device or a file of more than 16 MiB is no config: refused without blocking or reading it all.
  return from_string(binary::read_file(path, "config", uint64_t{16} << 20), path, overrides);
}

void Config::set(const std::string& assignment) {
  size_t eq = assignment.find('=');
  if (eq == std::string::npos) {
    throw Error("override '" + assignment + "': expected section.key=value");
  }
  std::string key = trim(assignment.substr(0, eq));
  const ConfigKey* k = find_config_key(key);
  if (!k) fail(origin_ + " (--set)", key, "unknown key; `pshard config --list` shows every key");
  std::string text = trim(assignment.substr(eq + 1));
  // A string on the command line may come quoted (--set run.name="a b"): the one pair of quotes around it is not
  // part of the value. (A TOML file's strings arrive unquoted already: stripping there lost quotes that were the
  // value's own, found by fuzz_config.)
  if (k->type == ConfigType::kString && text.size() >= 2 && text.front() == '"' && text.back() == '"') {
    text = text.substr(1, text.size() - 2);
  }
  values_[key] = canonical_from_text(*k, text, origin_ + " (--set)");
  explicit_[key] = true;
}

bool Config::is_set(const std::string& key) const { return explicit_.count(key) > 0; }

namespace {
const std::string& lookup(const std::map<std::string, std::string>& values, const std::string& key, ConfigType want) {
  const ConfigKey* k = find_config_key(key);
  if (!k) throw Error("internal: config key '" + key + "' is not in the schema");
  if (k->type != want) throw Error("internal: config key '" + key + "' read with the wrong type");
  return values.at(key);
}
}  // namespace

std::string Config::get_string(const std::string& key) const { return lookup(values_, key, ConfigType::kString); }

int64_t Config::get_int(const std::string& key) const { return std::stoll(lookup(values_, key, ConfigType::kInt)); }

double Config::get_double(const std::string& key) const { return std::stod(lookup(values_, key, ConfigType::kDouble)); }

bool Config::get_bool(const std::string& key) const { return lookup(values_, key, ConfigType::kBool) == "true"; }

std::vector<int64_t> Config::get_int_list(const std::string& key) const {
  std::string text = lookup(values_, key, ConfigType::kIntList);
  std::vector<int64_t> out;
  std::stringstream items(text.substr(1, text.size() - 2));
  std::string item;
  while (std::getline(items, item, ',')) {
    if (!trim(item).empty()) out.push_back(std::stoll(trim(item)));
  }
  return out;
}

std::string Config::to_toml() const {
  std::ostringstream out;
  std::string section;
  for (const ConfigKey& k : config_schema()) {
    std::string key = k.key;
    size_t dot = key.find('.');
    std::string sec = key.substr(0, dot);
    if (sec != section) {
      out << (section.empty() ? "" : "\n") << "[" << sec << "]\n";
      section = sec;
    }
    const std::string& v = values_.at(key);
    if (k.type == ConfigType::kString) {
      // A TOML basic string; values hold no control characters (checked when set).
      std::string quoted = "\"";
      for (char c : v) {
        if (c == '"' || c == '\\') quoted += '\\';
        quoted += c;
      }
      out << key.substr(dot + 1) << " = " << quoted << "\"\n";
    } else {
      out << key.substr(dot + 1) << " = " << v << "\n";
    }
  }
  return out.str();
}

}  // namespace pshard
