// Models by name (the table of models/zoo/registry.h): parameters, forward, backward.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/backend.h"
#include "models/layer.h"
#include "models/tensor.h"

namespace pshard {
class Config;
}

namespace pshard::models {

class Embedding;

// What to build. The data set decides input_shape, num_classes and target_dim; the config decides the rest.
struct ModelSpec {
  std::string name = "mlp";          // one of registered_models() (models/zoo/registry.h)
  std::vector<int64_t> hidden;       // mlp hidden sizes
  float dropout = 0.0f;              // mlp (after each hidden ReLU), lenet (before the last fc)
  std::vector<int64_t> input_shape;  // per sample: {C, H, W} or {F}
  int64_t num_classes = 0;           // 0 = regression (MSE on target_dim outputs)
  int64_t target_dim = 1;            // regression outputs
  std::string shortcut = "pad";      // resnet20: pad (option A) | projection (option B)
  std::string profile;               // profile: the profile file (models/zoo/profile.h)
  // dlrm: rows of each categorical field's embedding table, one per field (the data set decides them).
  std::vector<uint64_t> table_rows;
  int64_t embedding_dim = 16;          // dlrm: values per embedding row
  std::vector<int64_t> bottom_hidden;  // dlrm: hidden sizes of the bottom MLP over the dense features
  float embedding_init_scale = 0.05f;  // dlrm: embedding rows start uniform on [-s, s]

  // model.name, model.hidden, model.dropout, model.shortcut, model.profile, model.embedding_dim, model.bottom_hidden,
  // model.embedding_init_scale from cfg.
  static ModelSpec from_config(const Config& cfg, std::vector<int64_t> input_shape, int64_t num_classes,
                               int64_t target_dim);
};

// One parameter tensor. value and grad point into two contiguous blocks (all values in params() order, then the
// same for gradients), in backend memory: host-readable on the CPU backend.
struct ParamRef {
  std::string name;            // "fc1.weight", "layer2.0.bn1.bias"
  std::vector<int64_t> shape;  // PyTorch layout
  int64_t numel = 0;
  float* value = nullptr;
  float* grad = nullptr;
  int layer = 0;        // index of the layer that owns it
  bool frozen = false;  // Model::freeze: kept as it is, neither updated nor exchanged with servers
};

// Result of one forward.
struct StepResult {
  double loss_sum = 0.0;  // loss summed over the n samples (divide by n for the mean)
  int64_t correct = 0;    // argmax hits (0 for regression)
  int64_t n = 0;
};

// A feed-forward network: a list of named layers and a loss.
//
//   auto backend = make_cpu_backend(2);
//   ModelSpec spec = ModelSpec::from_config(cfg, {1, 28, 28}, 10, 0);
//   auto model = Model::create(spec, *backend);
//   model->init_params(seed);
//   StepResult r = model->forward(x, n, labels, nullptr, /*train=*/true);
//   model->backward([&](int first, int count) { /* push params()[first, first+count) */ });
//   for (const ParamRef& p : model->params()) /* p.value -= lr * p.grad */;
class Model {
 public:
  // A layer with its name ("conv1", "layer1.0").
  struct NamedLayer {
    std::string name;
    std::unique_ptr<Layer> layer;
  };

  // The model spec.name (models/zoo/registry.h); an unknown name or a spec that does not fit it is an Error.
  static std::unique_ptr<Model> create(const ModelSpec& spec, Backend& backend);
  // A model from layers (each layer's input shape is the previous one's output shape) and a loss.
  Model(Backend& backend, ModelSpec spec, std::vector<NamedLayer> layers, std::unique_ptr<Loss> loss);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // STABLE order (forward order, then declaration order inside a layer).
  const std::vector<ParamRef>& params() const { return params_; }
  // Non-trainable state (BatchNorm running statistics), never pushed to servers.
  std::vector<BufferRef> buffers();
  // Deterministic for a seed: parameters from their ParamDecl init (PyTorch defaults), running statistics reset,
  // dropout streams reseeded.
  void init_params(uint64_t seed);
  // Freezes every parameter whose name is a prefix or starts with prefix + "." ("layer1" freezes layer1.0.conv1.weight,
  // not layer10...). backward() then stops below the lowest layer that trains: one with a trainable parameter or an
  // Embedding (its rows train on the servers); nothing under it needs a gradient. The syncs skip frozen parameters.
  // Returns the number frozen; an Error names a prefix that matches no parameter, or says so when nothing would be
  // left to train.
  int freeze(const std::vector<std::string>& prefixes);
  int num_frozen() const;
  // Reseeds the dropout streams only (e.g. seed + worker rank, so that workers draw different masks).
  void set_dropout_seed(uint64_t seed);

  // Forward over n samples (x: n * prod(input_shape) floats, labels: n classes, targets: n * target_dim floats; all
  // host memory). before_layer(l) is called just before layer l runs. train = true keeps what backward needs, uses
  // batch statistics in BatchNorm and enables dropout.
  StepResult forward(const float* x, int64_t n, const int32_t* labels, const float* targets, bool train,
                     const std::function<void(int layer)>& before_layer = {});
  // Gradients of the MEAN loss of the last forward(train=true), written to params()[i].grad. on_grads_ready(first,
  // count) is called as soon as a layer's parameter gradients are final, in reverse layer order. Layers below the
  // lowest layer with a trainable parameter (freeze) are not run: their gradients are left as they were.
  void backward(const std::function<void(int first_param, int count)>& on_grads_ready = {});
  // Loss scaling (train.loss_scaling): backward() starts from `scale` x the mean loss's gradient, so every gradient it
  // writes is `scale` times the true one (the caller divides the parameters' gradients back: LossScaler::unscale).
  // 1 by default.
  void set_loss_scale(float scale);
  float loss_scale() const { return loss_scale_; }

  int num_layers() const { return static_cast<int>(layers_.size()); }
  const std::string& layer_name(int layer) const;
  const Layer& layer(int index) const;
  // The first Embedding layer (dlrm), where the trainer writes the batch's rows before forward and reads their
  // gradients after backward; nullptr when the model has none.
  Embedding* embedding();
  // Its index in the layer list; -1 when the model has none.
  int embedding_layer() const { return embedding_layer_; }
  int64_t num_params_elems() const { return num_params_elems_; }
  const ModelSpec& spec() const { return spec_; }
  Backend& backend() { return backend_; }
  // Output of the last forward: [n, num_classes] logits or [n, target_dim] predictions (backend memory).
  const Tensor& output() const { return acts_.back(); }
  // "lenet: 431080 parameters in 11 layers (conv1 Conv2d [20, 1, 5, 5] ...)" for logs.
  std::string summary() const;

 private:
  void ensure_batch(int64_t n);

  Backend& backend_;
  ModelSpec spec_;
  std::vector<NamedLayer> layers_;
  std::unique_ptr<Loss> loss_;
  std::vector<ParamRef> params_;
  std::vector<std::pair<int, int>> layer_params_;  // per layer: first param, count
  int64_t num_params_elems_ = 0;
  int lowest_trainable_layer_ = 0;           // backward stops here (freeze)
  int embedding_layer_ = -1;                 // the first Embedding layer, -1 when none
  Tensor values_, grads_;                    // the two parameter blocks
  std::vector<ReusableBuffer> act_buffers_;  // output of each layer
  std::vector<Tensor> acts_;                 // acts_[0] = input, acts_[l + 1] = output of layer l
  ReusableBuffer input_, labels_, targets_;  // device copies when the backend is not host-accessible
  ReusableBuffer input_nchw_;       // the uploaded input before its channels are regrouped (Backend::channel_block)
  ReusableBuffer grad_buffers_[2];  // ping-pong activation gradients
  const int32_t* last_labels_ = nullptr;
  const float* last_targets_ = nullptr;
  bool have_train_forward_ = false;
  uint64_t dropout_seed_ = 0;
  float loss_scale_ = 1.0f;
};

}  // namespace pshard::models
