// Host copies of a model's weights and gradients for backends whose memory the
// host cannot address (CUDA): pinned, reused buffers and asynchronous copies.
#pragma once

#include <memory>
#include <vector>

#include "models/backend.h"
#include "models/transfer.h"

namespace pshard::models {
class Model;
}

namespace pshard::trainer {

// On a host-accessible backend (CPU) this is a no-op view: weights(i) and
// grads(i) are the model's own memory and the copy calls do nothing. On CUDA
// they are pinned host buffers (allocated once); gradient downloads run on the
// backend's side stream after the backward that wrote them, weight uploads are
// ordered before every kernel queued after them.
//
//   DeviceStaging st(model);
//   st.begin_grad_download(i);  ...  st.wait_grad(i);  kv.zpush(name, st.grads(i), ...)
//   kv.wait(kv.zpull(name, st.weights(i), ...));  st.begin_weight_upload(i);
class DeviceStaging {
 public:
  explicit DeviceStaging(models::Model& model);
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  bool active() const { return active_; }
  float* weights(size_t i) const { return weights_[i]; }
  float* grads(size_t i) const { return grads_[i]; }

  void begin_grad_download(size_t i);
  void wait_grad(size_t i);
  bool grad_downloaded(size_t i);  // never blocks: true once grads(i) holds the gradient (or nothing is in flight)
  void begin_weight_upload(size_t i);
  // Waits for every upload begun so far (their host buffers may be reused after).
  void finish_uploads();
  // Synchronous: every weight device -> host.
  void download_all_weights();

 private:
  models::Model& model_;
  models::Backend& backend_;
  bool active_;
  std::unique_ptr<models::HostBuffer> weight_buf_, grad_buf_;
  std::vector<float*> weights_, grads_;
  std::vector<models::Backend::TransferTicket> grad_tickets_;
  std::vector<models::Backend::TransferTicket> uploads_;
};

}  // namespace pshard::trainer
