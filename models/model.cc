// Model: parameter blocks, initialisation, forward over the layer list, backward with per-layer callbacks.
#include "models/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "common/config/config.h"
#include "common/error.h"
#include "models/cpu/kernels.h"
#include "models/layers/embedding.h"
#include "models/zoo/registry.h"
#include "models/zoo/zoo.h"

namespace pshard::models {
namespace {

std::vector<int64_t> with_batch(int64_t n, const std::vector<int64_t>& shape) {
  std::vector<int64_t> s = {n};
  s.insert(s.end(), shape.begin(), shape.end());
  return s;
}

// Deterministic random numbers for initialisation: element j of parameter i under `seed`.
double init_uniform01(uint64_t seed, uint64_t param, uint64_t j, uint64_t stream) {
  uint64_t h = cpu::mix64(cpu::mix64(cpu::mix64(seed ^ 0x696e6974ull) + param * 4 + stream) + j);
  return (static_cast<double>(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);  // (0, 1)
}

}  // namespace

ModelSpec ModelSpec::from_config(const Config& cfg, std::vector<int64_t> input_shape, int64_t num_classes,
                                 int64_t target_dim) {
  ModelSpec s;
  s.name = cfg.get_string("model.name");
  s.hidden = cfg.get_int_list("model.hidden");
  s.dropout = static_cast<float>(cfg.get_double("model.dropout"));
  s.shortcut = cfg.get_string("model.shortcut");
  s.profile = cfg.get_string("model.profile");
  s.embedding_dim = cfg.get_int("model.embedding_dim");
  s.bottom_hidden = cfg.get_int_list("model.bottom_hidden");
  s.embedding_init_scale = static_cast<float>(cfg.get_double("model.embedding_init_scale"));
  s.input_shape = std::move(input_shape);
  s.num_classes = num_classes;
  s.target_dim = target_dim;
  return s;
}

std::unique_ptr<Model> Model::create(const ModelSpec& spec, Backend& backend) {
  if (spec.input_shape.empty() || shape_numel(spec.input_shape) <= 0) {
    throw Error("model " + spec.name + ": input shape " + shape_to_string(spec.input_shape) + " is empty");
  }
  if (spec.num_classes < 0 || (spec.num_classes == 0 && spec.target_dim <= 0)) {
    throw Error("model " + spec.name + ": needs num_classes > 0 (classification) or target_dim > 0 (regression)");
  }
  std::vector<NamedLayer> layers = model_info(spec.name).build(spec, backend);
  return std::make_unique<Model>(backend, spec, std::move(layers), zoo::loss_for(spec, backend));
}

Model::Model(Backend& backend, ModelSpec spec, std::vector<NamedLayer> layers, std::unique_ptr<Loss> loss)
    : backend_(backend), spec_(std::move(spec)), layers_(std::move(layers)), loss_(std::move(loss)) {
  if (layers_.empty() || !loss_) throw Error("model " + spec_.name + ": no layers or no loss");
  std::vector<int64_t> shape = spec_.input_shape;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& ly = *layers_[l].layer;
    if (ly.input_shape() != shape) {
      throw Error("model " + spec_.name + ": layer " + layers_[l].name + " expects input " +
                  shape_to_string(ly.input_shape()) + " but gets " + shape_to_string(shape));
    }
    shape = ly.output_shape();
    if (embedding_layer_ < 0 && dynamic_cast<const Embedding*>(&ly)) embedding_layer_ = static_cast<int>(l);
  }
  const int64_t outputs = spec_.num_classes > 0 ? spec_.num_classes : spec_.target_dim;
  if (shape_numel(shape) != outputs) {
    throw Error("model " + spec_.name + ": output " + shape_to_string(shape) + " does not match " +
                std::to_string(outputs) + (spec_.num_classes > 0 ? " classes" : " regression targets"));
  }
  // Parameters: one block for values, one for gradients, in layer order.
  std::vector<std::vector<ParamDecl>> decls(layers_.size());
  for (size_t l = 0; l < layers_.size(); ++l) {
    decls[l] = layers_[l].layer->param_decls();
    layer_params_.push_back({static_cast<int>(params_.size()), static_cast<int>(decls[l].size())});
    for (const ParamDecl& d : decls[l]) {
      ParamRef p;
      p.name = layers_[l].name + "." + d.name;
      p.shape = d.shape;
      p.numel = shape_numel(d.shape);
      p.layer = static_cast<int>(l);
      num_params_elems_ += p.numel;
      params_.push_back(std::move(p));
    }
  }
  values_ = Tensor(backend_, {num_params_elems_});
  grads_ = Tensor(backend_, {num_params_elems_});
  backend_.fill(values_.data(), num_params_elems_, 0.0f);
  backend_.fill(grads_.data(), num_params_elems_, 0.0f);
  int64_t offset = 0;
  for (ParamRef& p : params_) {
    p.value = values_.data() + offset;
    p.grad = grads_.data() + offset;
    offset += p.numel;
  }
  for (size_t l = 0; l < layers_.size(); ++l) {
    std::vector<float*> v, g;
    for (int i = 0; i < layer_params_[l].second; ++i) {
      v.push_back(params_[layer_params_[l].first + i].value);
      g.push_back(params_[layer_params_[l].first + i].grad);
    }
    layers_[l].layer->bind_params(v, g);
  }
  act_buffers_.resize(layers_.size());
  acts_.resize(layers_.size() + 1);
}

Model::~Model() = default;

std::vector<BufferRef> Model::buffers() {
  std::vector<BufferRef> all;
  for (NamedLayer& nl : layers_) {
    for (BufferRef b : nl.layer->buffers()) {
      b.name = nl.name + "." + b.name;
      all.push_back(std::move(b));
    }
  }
  return all;
}

void Model::init_params(uint64_t seed) {
  std::vector<float> host(static_cast<size_t>(num_params_elems_));
  size_t offset = 0, index = 0;
  for (size_t l = 0; l < layers_.size(); ++l) {
    for (const ParamDecl& d : layers_[l].layer->param_decls()) {
      const int64_t n = shape_numel(d.shape);
      float* out = host.data() + offset;
      for (int64_t j = 0; j < n; ++j) {
        switch (d.init) {
          case ParamDecl::Init::kConstant: out[j] = d.scale; break;
          case ParamDecl::Init::kUniform:
            out[j] = static_cast<float>((2.0 * init_uniform01(seed, index, j, 0) - 1.0) * d.scale);
            break;
          case ParamDecl::Init::kNormal: {
            const double u1 = init_uniform01(seed, index, j, 1), u2 = init_uniform01(seed, index, j, 2);
            out[j] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2) * d.scale);
            break;
          }
        }
      }
      offset += n;
      ++index;
    }
  }
  backend_.upload(values_.data(), host.data(), host.size() * sizeof(float));
  backend_.fill(grads_.data(), num_params_elems_, 0.0f);
  set_dropout_seed(seed);
  have_train_forward_ = false;
}

void Model::set_dropout_seed(uint64_t seed) {
  dropout_seed_ = seed;
  for (size_t l = 0; l < layers_.size(); ++l) layers_[l].layer->reset_state(cpu::mix64(seed ^ (0xd0d0ull + l)));
}

void Model::ensure_batch(int64_t n) {
  int64_t largest = shape_numel(spec_.input_shape);
  for (const NamedLayer& nl : layers_) largest = std::max(largest, shape_numel(nl.layer->output_shape()));
  // Sized once for the largest activation so that ping-pong views never reallocate under each other.
  for (ReusableBuffer& b : grad_buffers_) b.get(backend_, {largest * n});
}

StepResult Model::forward(const float* x, int64_t n, const int32_t* labels, const float* targets, bool train,
                          const std::function<void(int layer)>& before_layer) {
  if (n <= 0) throw Error("model " + spec_.name + ": forward over " + std::to_string(n) + " samples");
  if (!x) throw Error("model " + spec_.name + ": forward without input");
  const bool classify = spec_.num_classes > 0;
  if (classify && !labels) throw Error("model " + spec_.name + ": forward needs labels (classification)");
  if (!classify && !targets) throw Error("model " + spec_.name + ": forward needs regression targets");
  have_train_forward_ = false;
  ensure_batch(n);
  const std::vector<int64_t> in_shape = with_batch(n, spec_.input_shape);
  // The caller's samples are NCHW; a backend that keeps these channels in blocks gets them regrouped.
  const std::vector<int64_t>& s = spec_.input_shape;
  const int64_t block = s.size() == 3 && s[1] * s[2] > 1 ? backend_.channel_block(s[0]) : 1;
  if (backend_.host_accessible() && block == 1) {
    acts_[0] = Tensor::view(const_cast<float*>(x), in_shape);
  } else if (backend_.host_accessible()) {
    acts_[0] = input_.get(backend_, in_shape);
    backend_.regroup_channels(n, s[0], s[1] * s[2], 1, block, x, acts_[0].data());
  } else {
    Tensor staged = (block == 1 ? input_ : input_nchw_).get(backend_, in_shape);
    backend_.upload(staged.data(), x, sizeof(float) * staged.numel());
    acts_[0] = staged;
    if (block > 1) {
      acts_[0] = input_.get(backend_, in_shape);
      backend_.regroup_channels(n, s[0], s[1] * s[2], 1, block, staged.data(), acts_[0].data());
    }
  }
  // Labels and targets are copied (they are small), so the caller's arrays need not outlive this call.
  last_labels_ = nullptr;
  last_targets_ = nullptr;
  if (classify) {
    // int32 labels in a float-sized buffer: same width, never read as floats.
    float* dst = labels_.get(backend_, {n}).data();
    backend_.upload(dst, labels, sizeof(int32_t) * n);
    last_labels_ = reinterpret_cast<const int32_t*>(dst);
  } else {
    float* dst = targets_.get(backend_, {n, spec_.target_dim}).data();
    backend_.upload(dst, targets, sizeof(float) * n * spec_.target_dim);
    last_targets_ = dst;
  }
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (before_layer) before_layer(static_cast<int>(l));
    Layer& ly = *layers_[l].layer;
    const std::vector<int64_t> out_shape = with_batch(n, ly.output_shape());
    if (ly.is_view()) {
      acts_[l + 1] = acts_[l].reshape(out_shape);
      continue;
    }
    acts_[l + 1] = act_buffers_[l].get(backend_, out_shape);
    ly.forward(acts_[l], acts_[l + 1], train);
  }
  StepResult r;
  r.n = n;
  loss_->forward(acts_.back(), last_labels_, last_targets_, &r.loss_sum, &r.correct);
  have_train_forward_ = train;
  return r;
}

void Model::backward(const std::function<void(int first_param, int count)>& on_grads_ready) {
  if (!have_train_forward_) throw Error("model " + spec_.name + ": backward() needs a forward(train=true) first");
  const Tensor& out = acts_.back();
  // The input needs no gradient: the first layer that computes (after leading views such as Flatten) skips dx.
  int first_compute = 0;
  while (first_compute < num_layers() - 1 && layers_[first_compute].layer->is_view()) ++first_compute;
  int cur = 0;
  Tensor d = grad_buffers_[cur].get(backend_, out.shape());
  loss_->backward(out, last_labels_, last_targets_, d);
  if (loss_scale_ != 1.0f) {
    // On the backend (device memory on a GPU). Its finiteness answer is not needed: the parameters' gradients are
    // checked after backward (worker/trainer/loss_scaler.h).
    (void)backend_.scale_and_check({{d.data(), d.numel()}}, loss_scale_);
  }
  for (int l = static_cast<int>(layers_.size()) - 1; l >= 0; --l) {
    Layer& ly = *layers_[l].layer;
    if (ly.is_view()) {
      d = d.reshape(acts_[l].shape());
    } else if (l > first_compute && l > lowest_trainable_layer_) {
      Tensor dx = grad_buffers_[1 - cur].get(backend_, acts_[l].shape());
      ly.backward(acts_[l], acts_[l + 1], d, &dx);
      d = dx;
      cur = 1 - cur;
    } else {
      ly.backward(acts_[l], acts_[l + 1], d, nullptr);
    }
    if (on_grads_ready && layer_params_[l].second > 0) on_grads_ready(layer_params_[l].first, layer_params_[l].second);
    if (l == first_compute) break;            // only views (no parameters) before it
    if (l == lowest_trainable_layer_) break;  // frozen below: no gradient is wanted there
  }
}

void Model::set_loss_scale(float scale) {
  if (!(scale > 0.0f) || !std::isfinite(scale)) {
    throw Error("model " + spec_.name + ": the loss scale must be a positive finite number, got " +
                std::to_string(scale));
  }
  loss_scale_ = scale;
}

int Model::freeze(const std::vector<std::string>& prefixes) {
  for (const std::string& prefix : prefixes) {
    bool matched = false;
    for (ParamRef& p : params_) {
      if (p.name == prefix || p.name.rfind(prefix + ".", 0) == 0) {
        p.frozen = true;
        matched = true;
      }
    }
    if (!matched) {
      throw Error("model " + spec_.name + ": nothing to freeze under '" + prefix + "' (parameters are named like " +
                  params_.front().name + ", " + params_.back().name + ")");
    }
  }
  const int frozen = num_frozen();
  // The lowest layer that trains: one with a trainable parameter, or one whose values train elsewhere (Embedding).
  int lowest = num_layers();  // num_layers(): nothing trains
  for (const ParamRef& p : params_) {
    if (!p.frozen) lowest = std::min(lowest, p.layer);
  }
  for (int l = 0; l < num_layers(); ++l) {
    if (layers_[l].layer->trains_outside()) {
      lowest = std::min(lowest, l);
      break;
    }
  }
  if (lowest == num_layers()) {
    throw Error("model " + spec_.name + ": every parameter would be frozen; leave at least one layer to train");
  }
  lowest_trainable_layer_ = lowest;
  return frozen;
}

int Model::num_frozen() const {
  int n = 0;
  for (const ParamRef& p : params_) n += p.frozen ? 1 : 0;
  return n;
}

const std::string& Model::layer_name(int layer) const { return layers_.at(static_cast<size_t>(layer)).name; }

const Layer& Model::layer(int index) const { return *layers_.at(static_cast<size_t>(index)).layer; }

Embedding* Model::embedding() {
  return embedding_layer_ < 0 ? nullptr : static_cast<Embedding*>(layers_[embedding_layer_].layer.get());
}

std::string Model::summary() const {
  std::ostringstream out;
  out << spec_.name << ": " << num_params_elems_ << " parameters in " << layers_.size() << " layers (";
  for (size_t l = 0; l < layers_.size(); ++l) {
    out << (l ? ", " : "") << layers_[l].name << " " << layers_[l].layer->type() << " -> "
        << shape_to_string(layers_[l].layer->output_shape());
  }
  out << ")";
  return out.str();
}

}  // namespace pshard::models
