// Profile models: the profile file reader and the model built from it (one ProfileLayer per profile layer).
#include "models/zoo/profile.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <set>

#include "common/error.h"
#include "common/util/binary_file.h"
#include "common/util/json.h"
#include "models/layers/profile_layer.h"
#include "models/zoo/zoo.h"

namespace pshard::models {
namespace {

constexpr int64_t kMaxDim = int64_t{1} << 31;
constexpr int64_t kMaxTensor = int64_t{1} << 31;
constexpr int64_t kMaxModel = int64_t{1} << 33;
constexpr int64_t kMaxBatchOrClasses = int64_t{1} << 20;
constexpr double kMaxMs = 1e7;
constexpr size_t kMaxName = 256;
constexpr size_t kMaxLayers = 100000;

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Reads the fields of one profile, failing with the file and the place ("layers[3] (fc1): ...").
class ProfileReader {
 public:
  explicit ProfileReader(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw Error("model profile " + origin_ + ": " + (where.empty() ? "" : where + ": ") + what);
  }

  void expect_object(const Json& j, const std::string& where) const {
    if (!j.is_object()) fail(where, "expected a JSON object");
  }

  // Refuses fields outside `allowed` and a missing one of `required`.
  void check_fields(const Json& obj, const std::set<std::string>& allowed, const std::set<std::string>& required,
                    const std::string& where) const {
    for (const auto& [key, value] : obj.items()) {
      (void)value;
      if (allowed.count(key) == 0) {
        std::string list;
        for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
        fail(where, "unknown field \"" + key + "\" (the fields are " + list + ")");
      }
    }
    for (const std::string& key : required) {
      if (!obj.has(key)) fail(where, "missing field \"" + key + "\"");
    }
  }

  std::string name(const Json& obj, const std::string& key, const std::string& where) const {
    const Json& v = obj.at(key);
    if (!v.is_string()) fail(where, key + " must be a string");
    const std::string& s = v.as_string();
    if (s.empty() || s.size() > kMaxName) {
      fail(where, key + " must have 1 to " + std::to_string(kMaxName) + " characters, got " + std::to_string(s.size()));
    }
    for (char c : s) {
      if (c <= ' ' || c > '~' || c == '"' || c == '\\') {
        fail(where, key + " \"" + s + "\" holds a space, quote, backslash or non-printable character");
      }
    }
    return s;
  }

  std::string text(const Json& obj, const std::string& key, const std::string& where) const {
    const Json& v = obj.at(key);
    if (!v.is_string()) fail(where, key + " must be a string");
    return v.as_string();
  }

  double number(const Json& obj, const std::string& key, double min, double max, const std::string& where) const {
    const Json& v = obj.at(key);
    if (!v.is_number()) fail(where, key + " must be a number");
    const double x = v.as_number();
    if (!(x >= min)) fail(where, key + " is " + number_text(x) + ", must be >= " + number_text(min));
    if (!(x <= max)) fail(where, key + " is " + number_text(x) + ", must be <= " + number_text(max));
    return x;
  }

  int64_t integer(const Json& obj, const std::string& key, int64_t min, int64_t max, const std::string& where) const {
    const double x = number(obj, key, static_cast<double>(min), static_cast<double>(max), where);
    if (x != std::floor(x)) fail(where, key + " is " + number_text(x) + ", must be a whole number");
    return static_cast<int64_t>(x);
  }

  std::vector<int64_t> shape(const Json& obj, const std::string& key, const std::string& where) const {
    const Json& v = obj.at(key);
    if (!v.is_array() || v.size() == 0) fail(where, key + " must be a non-empty array of dimensions");
    std::vector<int64_t> dims;
    int64_t numel = 1;
    for (const Json& d : v.elements()) {
      if (!d.is_number() || d.as_number() != std::floor(d.as_number())) {
        fail(where, key + " " + v.dump() + ": dimensions must be whole numbers");
      }
      const double x = d.as_number();
      if (x < 1) fail(where, key + " " + v.dump() + " has a dimension < 1: the tensor would be empty");
      if (x > static_cast<double>(kMaxDim)) {
        fail(where, key + " " + v.dump() + " has a dimension above 2^31");
      }
      dims.push_back(static_cast<int64_t>(x));
      numel *= dims.back();  // <= 2^31 x 2^31 before the check below
      if (numel > kMaxTensor) fail(where, key + " " + v.dump() + " has more than 2^31 elements");
    }
    return dims;
  }

 private:
  std::string origin_;
};

}  // namespace

int64_t ModelProfile::num_params() const {
  int64_t n = 0;
  for (const Layer& l : layers) {
    for (const Param& p : l.params) n += shape_numel(p.shape);
  }
  return n;
}

double ModelProfile::forward_ms() const {
  double t = 0;
  for (const Layer& l : layers) t += l.forward_ms;
  return t;
}

double ModelProfile::backward_ms() const {
  double t = 0;
  for (const Layer& l : layers) t += l.backward_ms;
  return t;
}

ModelProfile parse_model_profile(const std::string& text, const std::string& origin) {
  ProfileReader r(origin);
  Json doc;
  try {
    doc = Json::parse(text, origin);
  } catch (const Error& e) {
    r.fail("", std::string("not valid JSON: ") + e.what());
  }
  r.expect_object(doc, "");
  r.check_fields(doc, {"name", "source", "batch", "classes", "precision", "step_ms", "input_shape", "layers"},
                 {"name", "source", "batch", "classes", "layers"}, "");
  ModelProfile p;
  p.origin = origin;
  p.name = r.name(doc, "name", "");
  p.source = r.text(doc, "source", "");
  if (p.source.empty()) r.fail("", "source is empty: say how the times were made");
  p.batch = r.integer(doc, "batch", 1, kMaxBatchOrClasses, "");
  p.classes = r.integer(doc, "classes", 2, kMaxBatchOrClasses, "");
  if (doc.has("precision")) {
    p.precision = r.text(doc, "precision", "");
    if (p.precision != "fp32" && p.precision != "bf16" && p.precision != "fp16") {
      r.fail("", "precision must be fp32, bf16 or fp16, got \"" + p.precision + "\"");
    }
  }
  if (doc.has("step_ms")) p.step_ms = r.number(doc, "step_ms", 0, kMaxMs, "");
  if (doc.has("input_shape")) p.input_shape = r.shape(doc, "input_shape", "");

  const Json& layers = doc.at("layers");
  if (!layers.is_array()) r.fail("", "layers must be an array");
  if (layers.size() == 0) r.fail("", "layers is empty: a profile needs at least one layer");
  if (layers.size() > kMaxLayers) r.fail("", "more than " + std::to_string(kMaxLayers) + " layers");
  std::set<std::string> layer_names, tensor_names;
  int64_t total = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Json& lj = layers.elements()[i];
    std::string where = "layers[" + std::to_string(i) + "]";
    r.expect_object(lj, where);
    if (lj.has("name") && lj.at("name").is_string()) where += " (" + lj.at("name").as_string() + ")";
    r.check_fields(lj, {"name", "forward_ms", "backward_ms", "params"}, {"name", "forward_ms", "backward_ms", "params"},
                   where);
    ModelProfile::Layer layer;
    layer.name = r.name(lj, "name", where);
    if (!layer_names.insert(layer.name).second) r.fail(where, "duplicate layer name \"" + layer.name + "\"");
    layer.forward_ms = r.number(lj, "forward_ms", 0, kMaxMs, where);
    layer.backward_ms = r.number(lj, "backward_ms", 0, kMaxMs, where);
    const Json& params = lj.at("params");
    if (!params.is_array()) r.fail(where, "params must be an array (empty for a layer without parameters)");
    for (size_t k = 0; k < params.size(); ++k) {
      const Json& pj = params.elements()[k];
      const std::string pwhere = where + ": params[" + std::to_string(k) + "]";
      r.expect_object(pj, pwhere);
      r.check_fields(pj, {"name", "shape"}, {"name", "shape"}, pwhere);
      ModelProfile::Param param;
      param.name = r.name(pj, "name", pwhere);
      const std::string tensor = layer.name + "." + param.name;
      if (!tensor_names.insert(tensor).second) r.fail(pwhere, "duplicate tensor name \"" + tensor + "\"");
      param.shape = r.shape(pj, "shape", pwhere + " (" + param.name + ")");
      total += shape_numel(param.shape);
      if (total > kMaxModel) r.fail(pwhere, "the model passes 2^33 parameters here");
      layer.params.push_back(std::move(param));
    }
    p.layers.push_back(std::move(layer));
  }
  const double layers_ms = p.forward_ms() + p.backward_ms();
  if (p.step_ms > 0 && layers_ms > p.step_ms * 1.01) {
    r.fail("", "the layers' forward + backward take " + number_text(layers_ms) + " ms, more than step_ms " +
                   number_text(p.step_ms));
  }
  return p;
}

ModelProfile read_model_profile(const std::string& path) {
  return parse_model_profile(binary::read_file(path, "model profile"), path);
}

namespace zoo {
namespace {

std::vector<Model::NamedLayer> build(const ModelSpec& spec, Backend& backend) {
  if (spec.profile.empty()) {
    throw Error(
        "model profile needs model.profile = FILE: a profile of layers, parameter shapes and times "
        "(profiles/*.json)");
  }
  if (!backend.host_accessible()) {
    throw Error(
        "model profile runs on the CPU backend only (train.device = cpu): its layers sleep instead of "
        "computing, so a GPU has nothing to do; got " +
        backend.describe());
  }
  if (spec.num_classes <= 0) {
    throw Error(
        "model profile is a classifier: it needs a data set with classes (data.name = synthetic-images), "
        "not regression targets");
  }
  const ModelProfile profile = read_model_profile(spec.profile);
  if (spec.num_classes != profile.classes) {
    throw Error("model profile " + spec.profile + ": the profile has " + std::to_string(profile.classes) +
                " classes but the data set has " + std::to_string(spec.num_classes) +
                " (set data.classes = " + std::to_string(profile.classes) + ")");
  }
  // The activations are placeholders: one number per sample between layers, the logits after the last.
  std::vector<Model::NamedLayer> layers;
  auto pace = std::make_shared<ProfilePace>();  // one for the layers of this model
  std::vector<int64_t> in = spec.input_shape;
  for (size_t l = 0; l < profile.layers.size(); ++l) {
    const ModelProfile::Layer& pl = profile.layers[l];
    std::vector<ParamDecl> decls;
    for (const ModelProfile::Param& p : pl.params) {
      // The weights never change what a profile layer computes; PyTorch's default bound keeps them realistic
      // for compression and pull precision: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = all but the first dim.
      const int64_t fan_in = shape_numel(p.shape) / p.shape[0];
      decls.push_back({p.name, p.shape, ParamDecl::Init::kUniform, 1.0f / std::sqrt(static_cast<float>(fan_in))});
    }
    std::vector<int64_t> out =
        l + 1 == profile.layers.size() ? std::vector<int64_t>{profile.classes} : std::vector<int64_t>{1};
    layers.push_back({pl.name, std::make_unique<ProfileLayer>(backend, in, out, std::move(decls), pl.forward_ms,
                                                              pl.backward_ms, profile.batch, pace, l == 0)});
    in = out;
  }
  return layers;
}

}  // namespace

ModelInfo profile() {
  return {"profile",
          "a real architecture's tensors and per-layer times from model.profile, compute replaced by waits",
          build,
          {1, 1, 1},
          ModelTargets::kClasses};
}

}  // namespace zoo
}  // namespace pshard::models
