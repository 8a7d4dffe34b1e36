// The default (synchronous) transfer methods of Backend, and HostBuffer.
#include "models/transfer.h"

#include <cstdlib>
#include <string>

#include "common/error.h"

namespace pshard::models {

void* Backend::allocate_host(size_t bytes) {
  constexpr size_t kAlignment = 64;
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded ? rounded : kAlignment);
  if (!p) throw Error("backend: out of host memory allocating " + std::to_string(bytes) + " bytes");
  return p;
}

void Backend::deallocate_host(void* p) { std::free(p); }

Backend::TransferTicket Backend::begin_download(void* host_dst, const void* src, size_t bytes) {
  download(host_dst, src, bytes);
  return 0;
}

Backend::TransferTicket Backend::begin_upload(void* dst, const void* host_src, size_t bytes) {
  upload(dst, host_src, bytes);
  return 0;
}

void Backend::wait_transfer(TransferTicket, double) {}

bool Backend::transfer_done(TransferTicket) { return true; }

HostBuffer::~HostBuffer() {
  if (data_) backend_.deallocate_host(data_);
}

float* HostBuffer::get(size_t floats) {
  if (floats > floats_ || !data_) {
    if (data_) backend_.deallocate_host(data_);
    data_ = nullptr;
    floats_ = 0;
    data_ = static_cast<float*>(backend_.allocate_host(sizeof(float) * (floats ? floats : 1)));
    floats_ = floats;
  }
  return data_;
}

}  // namespace pshard::models
