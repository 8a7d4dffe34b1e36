/* A stand-in for libnvidia-ml at the dlopen boundary of GpuSampler (common/metrics/gpu_sampler.cc), for tests on
 * machines without a GPU: one GPU (index 0) that is always 42 % busy with 1.5 GiB of its 8 GiB in use. Any other
 * index is NVML_ERROR_INVALID_ARGUMENT (2). Loaded through PSHARD_NVML_LIBRARY. */
typedef struct {
  unsigned int gpu;
  unsigned int memory;
} StubUtilization;

typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} StubMemory;

static int stub_device;

int nvmlInit_v2(void) { return 0; }

int nvmlShutdown(void) { return 0; }

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index != 0) return 2;
  *device = &stub_device;
  return 0;
}

int nvmlDeviceGetUtilizationRates(void* device, StubUtilization* utilization) {
  if (device != &stub_device) return 2;
  utilization->gpu = 42;
  utilization->memory = 17;
  return 0;
}

int nvmlDeviceGetMemoryInfo(void* device, StubMemory* memory) {
  if (device != &stub_device) return 2;
  memory->total = 8ULL << 30;
  memory->used = 3ULL << 29;
  memory->free = memory->total - memory->used;
  return 0;
}
