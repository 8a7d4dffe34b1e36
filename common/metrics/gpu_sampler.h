// GPU utilisation and memory of a worker's GPU, sampled through NVML on a background thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace pshard {

// What NVML measured over one stretch of time (an epoch): the mean of the utilisation samples and the highest
// memory use seen.
struct GpuUsage {
  double util_pct = 0;          // mean "GPU busy" percentage (nvmlDeviceGetUtilizationRates().gpu)
  uint64_t mem_peak_bytes = 0;  // highest nvmlDeviceGetMemoryInfo().used
  int64_t samples = 0;
};

// The NVML library to open: PSHARD_NVML_LIBRARY when set (a path or soname), else libnvidia-ml.so.1 (the driver's).
std::string nvml_library_name();

// The NVML index of this process's GPU: the first entry of CUDA_VISIBLE_DEVICES when it is a number (what
// `pshard launch` assigns each CUDA worker), else `fallback`.
unsigned nvml_device_index(const char* cuda_visible_devices, unsigned fallback);

// Samples one GPU every `period_ms` on its own thread, from construction until destruction. NVML is opened with
// dlopen: without it (no driver, a CPU machine, a device it does not know) the sampler is inactive and take() returns
// nothing; it never throws or stops the worker. take() hands back what was sampled since the last take().
//
//   GpuSampler gpu(nvml_device_index(std::getenv("CUDA_VISIBLE_DEVICES"), 0));
//   ... an epoch ...
//   if (std::optional<GpuUsage> u = gpu.take()) report.gpu = *u;
class GpuSampler;

// The sampler of a worker whose GPU is worth watching (`watch`: train.device = "cuda", or for a program through the
// C API also a CUDA_VISIBLE_DEVICES that names a GPU), on the GPU CUDA_VISIBLE_DEVICES names first (else 0); null
// when `watch` is false or NVML is absent (never an error).
std::unique_ptr<GpuSampler> make_gpu_sampler(bool watch);

class GpuSampler {
 public:
  explicit GpuSampler(unsigned device_index, int period_ms = 200);
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  bool active() const { return active_; }
  // Why the sampler is inactive ("" when active), for a log line.
  const std::string& why_inactive() const { return why_inactive_; }
  // Takes one sample now (also what the thread does), then returns and resets what was gathered; empty when
  // inactive or when no sample succeeded.
  std::optional<GpuUsage> take();

 private:
  struct Api;
  void sample();
  void loop(int period_ms);

  Api* api_ = nullptr;
  void* device_ = nullptr;
  bool active_ = false;
  std::string why_inactive_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  double util_sum_ = 0;
  uint64_t mem_peak_ = 0;
  int64_t samples_ = 0;
  std::thread thread_;
};

}  // namespace pshard
