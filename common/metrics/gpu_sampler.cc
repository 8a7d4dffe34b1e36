// NVML through dlopen: the few entry points the sampler calls, declared here with NVML's C types (nvml.h is not
// needed to build), so that the executable has no DT_NEEDED on libnvidia-ml and runs where the driver is absent.
#include "common/metrics/gpu_sampler.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <system_error>

#include "common/util/signals.h"

namespace pshard {
namespace {

// nvml.h's types: nvmlReturn_t is an int (0 = NVML_SUCCESS), nvmlDevice_t an opaque pointer.
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
using InitFn = int (*)();
using ShutdownFn = int (*)();
using HandleByIndexFn = int (*)(unsigned int, void**);
using UtilizationFn = int (*)(void*, NvmlUtilization*);
using MemoryFn = int (*)(void*, NvmlMemory*);

}  // namespace

struct GpuSampler::Api {
  void* handle = nullptr;
  InitFn init = nullptr;
  ShutdownFn shutdown = nullptr;
  HandleByIndexFn handle_by_index = nullptr;
  UtilizationFn utilization = nullptr;
  MemoryFn memory = nullptr;
};

std::string nvml_library_name() {
  const char* named = std::getenv("PSHARD_NVML_LIBRARY");
  return named && *named ? named : "libnvidia-ml.so.1";
}

unsigned nvml_device_index(const char* cuda_visible_devices, unsigned fallback) {
  if (!cuda_visible_devices || !*cuda_visible_devices) return fallback;
  char* end = nullptr;
  const unsigned long v = std::strtoul(cuda_visible_devices, &end, 10);
  if (end == cuda_visible_devices || (*end != '\0' && *end != ',') || v > 4096) return fallback;
  return static_cast<unsigned>(v);
}

std::unique_ptr<GpuSampler> make_gpu_sampler(bool watch) {
  if (!watch) return nullptr;
  auto sampler = std::make_unique<GpuSampler>(nvml_device_index(std::getenv("CUDA_VISIBLE_DEVICES"), 0));
  if (!sampler->active()) return nullptr;
  return sampler;
}

GpuSampler::GpuSampler(unsigned device_index, int period_ms) {
  const std::string name = nvml_library_name();
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    why_inactive_ = "cannot open " + name + ": " + (why ? why : "not found");
    return;
  }
  auto api = std::make_unique<Api>();
  api->handle = handle;
  api->init = reinterpret_cast<InitFn>(dlsym(handle, "nvmlInit_v2"));
  api->shutdown = reinterpret_cast<ShutdownFn>(dlsym(handle, "nvmlShutdown"));
  api->handle_by_index = reinterpret_cast<HandleByIndexFn>(dlsym(handle, "nvmlDeviceGetHandleByIndex_v2"));
  api->utilization = reinterpret_cast<UtilizationFn>(dlsym(handle, "nvmlDeviceGetUtilizationRates"));
  api->memory = reinterpret_cast<MemoryFn>(dlsym(handle, "nvmlDeviceGetMemoryInfo"));
  if (!api->init || !api->shutdown || !api->handle_by_index || !api->utilization || !api->memory) {
    why_inactive_ = name + " lacks an NVML entry point";
    dlclose(handle);
    return;
  }
  if (int rc = api->init(); rc != 0) {
    why_inactive_ = "nvmlInit_v2 failed (NVML error " + std::to_string(rc) + ")";
    dlclose(handle);
    return;
  }
  if (int rc = api->handle_by_index(device_index, &device_); rc != 0) {
    why_inactive_ = "NVML has no GPU " + std::to_string(device_index) + " (NVML error " + std::to_string(rc) + ")";
    api->shutdown();
    dlclose(handle);
    return;
  }
  api_ = api.release();
  active_ = true;
  sample();
  try {
    thread_ = start_thread([this, period_ms] { loop(std::max(period_ms, 1)); });
  } catch (const std::system_error&) {
    // No thread to spare: the sampler still samples at each take(), once an epoch.
  }
}

GpuSampler::~GpuSampler() {
  if (!active_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  api_->shutdown();
  dlclose(api_->handle);
  delete api_;
}

void GpuSampler::sample() {
  NvmlUtilization util{};
  NvmlMemory mem{};
  const bool have_util = api_->utilization(device_, &util) == 0;
  const bool have_mem = api_->memory(device_, &mem) == 0;
  if (!have_util && !have_mem) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (have_util) {
    util_sum_ += util.gpu;
    ++samples_;
  }
  if (have_mem) mem_peak_ = std::max<uint64_t>(mem_peak_, mem.used);
}

void GpuSampler::loop(int period_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (cv_.wait_for(lock, std::chrono::milliseconds(period_ms), [this] { return stop_; })) break;
    lock.unlock();
    sample();
    lock.lock();
  }
}

std::optional<GpuUsage> GpuSampler::take() {
  if (!active_) return std::nullopt;
  sample();
  std::lock_guard<std::mutex> lock(mu_);
  if (samples_ == 0) return std::nullopt;
  GpuUsage u;
  u.util_pct = util_sum_ / static_cast<double>(samples_);
  u.mem_peak_bytes = mem_peak_;
  u.samples = samples_;
  util_sum_ = 0;
  mem_peak_ = 0;
  samples_ = 0;
  return u;
}

}  // namespace pshard
