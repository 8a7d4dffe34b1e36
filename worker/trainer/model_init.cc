// Copying named tensors into a model's parameters and buffers.
#include "worker/trainer/model_init.h"

#include <cstring>
#include <unordered_map>

#include "common/error.h"
#include "models/model.h"

namespace pshard::trainer {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string join(const std::vector<std::string>& names, size_t limit) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < limit; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > limit) s += " and " + std::to_string(names.size() - limit) + " more";
  return s;
}

}  // namespace

std::string ModelInitReport::describe() const {
  std::string s = "loaded " + std::to_string(loaded.size()) + " tensors";
  if (!reinitialised.empty()) s += "; reinitialised (shape differs): " + join(reinitialised, 8);
  if (!not_in_file.empty()) s += "; kept (not in the file): " + join(not_in_file, 8);
  if (!unused.empty()) s += "; not in the model: " + join(unused, 8);
  return s;
}

ModelInitReport init_from_tensors(models::Model& model, const std::vector<NamedTensor>& tensors,
                                  const std::string& source) {
  std::unordered_map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : tensors) by_name[t.name] = &t;
  models::Backend& backend = model.backend();
  ModelInitReport report;
  std::vector<std::string> missing_params;
  std::unordered_map<std::string, bool> used;
  auto copy = [&](const std::string& name, const std::vector<int64_t>& shape, int64_t numel, float* dst,
                  bool parameter) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      (parameter ? missing_params : report.not_in_file).push_back(name);
      return;
    }
    used[name] = true;
    const NamedTensor& t = *it->second;
    if (t.shape != shape) {
      report.reinitialised.push_back(name + " " + shape_text(shape) + " (file " + shape_text(t.shape) + ")");
      return;
    }
    const size_t bytes = static_cast<size_t>(numel) * sizeof(float);
    if (backend.host_accessible()) {
      std::memcpy(dst, t.data.data(), bytes);
    } else {
      backend.upload(dst, t.data.data(), bytes);
    }
    report.loaded.push_back(name);
  };
  for (const models::ParamRef& p : model.params()) copy(p.name, p.shape, p.numel, p.value, true);
  for (const models::BufferRef& b : model.buffers()) copy(b.name, b.shape, b.numel, b.value, false);
  if (!missing_params.empty()) {
    throw Error(source + " does not fit model " + model.spec().name + ": it has no tensor " + join(missing_params, 5) +
                " (" + std::to_string(missing_params.size()) + " of " + std::to_string(model.params().size()) +
                " parameters missing)");
  }
  if (report.loaded.empty()) {
    throw Error(source + " does not fit model " + model.spec().name + ": no tensor has the model's shape (" +
                join(report.reinitialised, 5) + ")");
  }
  for (const NamedTensor& t : tensors) {
    if (!used.count(t.name)) report.unused.push_back(t.name);
  }
  return report;
}

}  // namespace pshard::trainer
