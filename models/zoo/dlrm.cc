// DLRM click model: bottom MLP over the dense features, one embedding row per categorical field, the pairwise dot
// interaction of those vectors, top MLP.
#include "common/error.h"
#include "models/layers/dot_interaction.h"
#include "models/layers/embedding.h"
#include "models/layers/linear.h"
#include "models/layers/relu.h"
#include "models/zoo/zoo.h"

namespace pshard::models::zoo {
namespace {

// Appends "<prefix>_fc<k>" Linear + "<prefix>_relu<k>" ReLU per size; returns the features out of the last one.
int64_t append_mlp(Backend& backend, const std::string& prefix, const char* key, const std::vector<int64_t>& sizes,
                   int64_t in, std::vector<Model::NamedLayer>& layers) {
  int k = 1;
  for (int64_t h : sizes) {
    if (h <= 0) throw Error("model dlrm: hidden size " + std::to_string(h) + " in " + key + " must be > 0");
    const std::string id = std::to_string(k++);
    layers.push_back({prefix + "_fc" + id, std::make_unique<Linear>(backend, in, h)});
    layers.push_back({prefix + "_relu" + id, std::make_unique<ReLU>(backend, std::vector<int64_t>{h})});
    in = h;
  }
  return in;
}

std::vector<Model::NamedLayer> build(const ModelSpec& spec, Backend& backend) {
  if (spec.table_rows.empty()) {
    throw Error("model dlrm needs categorical fields: train it on data.name = synthetic-ctr");
  }
  if (spec.embedding_dim < 1) {
    throw Error("model dlrm: model.embedding_dim must be >= 1, got " + std::to_string(spec.embedding_dim));
  }
  if (!(spec.embedding_init_scale >= 0.0f)) {
    throw Error("model dlrm: model.embedding_init_scale must be >= 0, got " +
                std::to_string(spec.embedding_init_scale));
  }
  if (spec.num_classes != 2) {
    throw Error("model dlrm: a click model needs a data set of 2 classes (data.name = synthetic-ctr), got " +
                (spec.num_classes > 0 ? std::to_string(spec.num_classes) + " classes" : std::string("regression")));
  }
  if (spec.input_shape.size() != 1) {
    throw Error("model dlrm: the dense features must be one vector per sample, got input " +
                shape_to_string(spec.input_shape));
  }
  if (!backend.host_accessible()) {
    throw Error("model dlrm: its Embedding layer runs on host memory; use train.device = cpu");
  }
  const int64_t dim = spec.embedding_dim;
  std::vector<Model::NamedLayer> layers;
  // The bottom MLP ends in dim features: the dense vector interacts with the rows as one more vector.
  std::vector<int64_t> bottom_sizes = spec.bottom_hidden;
  bottom_sizes.push_back(dim);
  append_mlp(backend, "bottom", "model.bottom_hidden", bottom_sizes, spec.input_shape[0], layers);

  std::vector<TableDecl> tables;
  for (size_t f = 0; f < spec.table_rows.size(); ++f) {
    tables.push_back({"embed." + std::to_string(f), spec.table_rows[f], dim, spec.embedding_init_scale});
  }
  const int64_t fields = static_cast<int64_t>(tables.size());
  layers.push_back({"embed", std::make_unique<Embedding>(backend, dim, std::move(tables))});
  auto interact = std::make_unique<DotInteraction>(backend, fields + 1, dim);
  const int64_t interactions = interact->output_shape()[0];
  layers.push_back({"interact", std::move(interact)});

  const int64_t in = append_mlp(backend, "top", "model.hidden", spec.hidden, interactions, layers);
  layers.push_back(
      {"top_fc" + std::to_string(spec.hidden.size() + 1), std::make_unique<Linear>(backend, in, outputs_of(spec))});
  return layers;
}

}  // namespace

ModelInfo dlrm() {
  return {"dlrm",
          "DLRM click model: bottom MLP over the dense features, an embedding row per categorical field (rows on "
          "the servers), pairwise dot interaction, top MLP",
          build,
          {4},
          ModelTargets::kClasses,
          /*embedding_tables=*/true};
}

}  // namespace pshard::models::zoo
