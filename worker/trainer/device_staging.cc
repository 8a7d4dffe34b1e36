// Staging parameters between device memory and pinned host buffers.
#include "worker/trainer/device_staging.h"

#include "models/model.h"

namespace pshard::trainer {
namespace {
constexpr double kTransferTimeoutS = 60.0;
}

DeviceStaging::DeviceStaging(models::Model& model)
    : model_(model), backend_(model.backend()), active_(!model.backend().host_accessible()) {
  const auto& params = model.params();
  grad_tickets_.assign(params.size(), 0);
  if (!active_) {
    for (const models::ParamRef& p : params) {
      weights_.push_back(p.value);
      grads_.push_back(p.grad);
    }
    return;
  }
  weight_buf_ = std::make_unique<models::HostBuffer>(backend_);
  grad_buf_ = std::make_unique<models::HostBuffer>(backend_);
  const size_t total = static_cast<size_t>(model.num_params_elems());
  float* w = weight_buf_->get(total);
  float* g = grad_buf_->get(total);
  size_t offset = 0;
  for (const models::ParamRef& p : params) {
    weights_.push_back(w + offset);
    grads_.push_back(g + offset);
    offset += static_cast<size_t>(p.numel);
  }
}

DeviceStaging::~DeviceStaging() {
  if (!active_) return;
  // Buffers must not be freed under an in-flight copy.
  try {
    for (size_t i = 0; i < grad_tickets_.size(); ++i) wait_grad(i);
    finish_uploads();
  } catch (...) {
    // destructor: the backend already logged the failure
  }
}

void DeviceStaging::begin_grad_download(size_t i) {
  if (!active_) return;
  const models::ParamRef& p = model_.params()[i];
  grad_tickets_[i] = backend_.begin_download(grads_[i], p.grad, static_cast<size_t>(p.numel) * sizeof(float));
}

void DeviceStaging::wait_grad(size_t i) {
  if (!active_ || grad_tickets_[i] == 0) return;
  models::Backend::TransferTicket t = grad_tickets_[i];
  grad_tickets_[i] = 0;
  backend_.wait_transfer(t, kTransferTimeoutS);
}

bool DeviceStaging::grad_downloaded(size_t i) {
  if (!active_ || grad_tickets_[i] == 0) return true;
  if (!backend_.transfer_done(grad_tickets_[i])) return false;
  grad_tickets_[i] = 0;
  return true;
}

void DeviceStaging::begin_weight_upload(size_t i) {
  if (!active_) return;
  const models::ParamRef& p = model_.params()[i];
  uploads_.push_back(backend_.begin_upload(p.value, weights_[i], static_cast<size_t>(p.numel) * sizeof(float)));
}

void DeviceStaging::finish_uploads() {
  for (models::Backend::TransferTicket t : uploads_) backend_.wait_transfer(t, kTransferTimeoutS);
  uploads_.clear();
}

void DeviceStaging::download_all_weights() {
  if (!active_) return;
  const auto& params = model_.params();
  for (size_t i = 0; i < params.size(); ++i) {
    backend_.download(weights_[i], params[i].value, static_cast<size_t>(params[i].numel) * sizeof(float));
  }
}

}  // namespace pshard::trainer
