// GPU sampling through NVML opened with dlopen, tested with a stand-in library (tests/support/nvml_stub.c: GPU 0 is
// 42 % busy with 1.5 GiB in use): the figures reach the worker's epoch report and the combined epoch and summary
// events; without NVML, or for a GPU NVML does not know, the fields are absent and nothing fails.
#include "common/metrics/gpu_sampler.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <string>
#include <thread>

#include "common/error.h"
#include "common/metrics/epoch_report.h"

namespace pshard {
namespace {

constexpr uint64_t kStubMemUsed = 3ULL << 29;  // 1.5 GiB

class NvmlLibrary {
 public:
  explicit NvmlLibrary(const char* path) { setenv("PSHARD_NVML_LIBRARY", path, 1); }
  ~NvmlLibrary() { unsetenv("PSHARD_NVML_LIBRARY"); }
};

WorkerEpochReport report(uint32_t rank) {
  WorkerEpochReport r;
  r.rank = rank;
  r.epoch = 1;
  r.step = 10;
  r.samples = 80;
  r.epoch_s = 2.0;
  return r;
}

TEST(GpuSampler, TheStubsFiguresReachTheEpochReport) {
  NvmlLibrary lib(PSHARD_NVML_STUB);
  GpuSampler sampler(0, 5);
  ASSERT_TRUE(sampler.active()) << sampler.why_inactive();
  std::optional<GpuUsage> u = sampler.take();
  ASSERT_TRUE(u.has_value());
  EXPECT_DOUBLE_EQ(u->util_pct, 42.0);
  EXPECT_EQ(u->mem_peak_bytes, kStubMemUsed);
  EXPECT_GE(u->samples, 1);

  WorkerEpochReport r = report(0);
  r.take_gpu_usage(&sampler);
  ASSERT_TRUE(r.has_gpu);
  const Json j = r.to_json();
  EXPECT_DOUBLE_EQ(j.at("gpu_util_pct").as_number(), 42.0);
  EXPECT_EQ(j.at("gpu_mem_peak_bytes").as_number(), static_cast<double>(kStubMemUsed));
  const WorkerEpochReport back = WorkerEpochReport::from_json(j);
  EXPECT_TRUE(back.has_gpu);
  EXPECT_EQ(back.gpu_mem_peak_bytes, kStubMemUsed);
}

TEST(GpuSampler, TheBackgroundThreadSamplesSeveralTimesAnEpoch) {
  NvmlLibrary lib(PSHARD_NVML_STUB);
  std::unique_ptr<GpuSampler> sampler = make_gpu_sampler(true);
  ASSERT_NE(sampler, nullptr);
  (void)sampler->take();
  // make_gpu_sampler samples every 200 ms: about 5 samples in a second, plus the one take() adds.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  std::optional<GpuUsage> u = sampler->take();
  ASSERT_TRUE(u.has_value());
  EXPECT_GE(u->samples, 4);
  EXPECT_LE(u->samples, 8);
}

TEST(GpuSampler, WithoutNvmlTheFieldsAreAbsentAndNothingFails) {
  NvmlLibrary lib("/nonexistent/libnvidia-ml.so.1");
  GpuSampler sampler(0);
  EXPECT_FALSE(sampler.active());
  EXPECT_NE(sampler.why_inactive().find("cannot open"), std::string::npos) << sampler.why_inactive();
  EXPECT_FALSE(sampler.take().has_value());
  EXPECT_EQ(make_gpu_sampler(true), nullptr);

  WorkerEpochReport r = report(0);
  r.take_gpu_usage(nullptr);
  r.take_gpu_usage(&sampler);
  EXPECT_FALSE(r.has_gpu);
  const Json j = r.to_json();
  EXPECT_FALSE(j.has("gpu_util_pct"));
  EXPECT_FALSE(j.has("gpu_mem_peak_bytes"));
  EXPECT_FALSE(WorkerEpochReport::from_json(j).has_gpu);
  const Json e = combine_epoch({r});
  EXPECT_FALSE(e.has("gpu_util_pct"));
  RunTotals totals;
  totals.add_epoch(e);
  EXPECT_FALSE(totals.summary(1.0).has("gpu_util_pct"));
}

TEST(GpuSampler, AGpuNvmlDoesNotKnowOrACpuWorkerIsNoSampler) {
  NvmlLibrary lib(PSHARD_NVML_STUB);
  GpuSampler sampler(3);  // the stub has GPU 0 only
  EXPECT_FALSE(sampler.active());
  EXPECT_NE(sampler.why_inactive().find("no GPU 3"), std::string::npos) << sampler.why_inactive();
  EXPECT_EQ(make_gpu_sampler(false), nullptr);
}

TEST(GpuSampler, DeviceIndexFromCudaVisibleDevices) {
  EXPECT_EQ(nvml_device_index(nullptr, 0), 0u);
  EXPECT_EQ(nvml_device_index("", 1), 1u);
  EXPECT_EQ(nvml_device_index("2", 0), 2u);
  EXPECT_EQ(nvml_device_index("3,1", 0), 3u);
  EXPECT_EQ(nvml_device_index("GPU-8f3a", 0), 0u);  // a UUID: the fallback
}

TEST(GpuSampler, EpochEventsAverageUtilisationAndKeepThePeakMemory) {
  WorkerEpochReport a = report(0), b = report(1), cpu = report(2);
  a.has_gpu = b.has_gpu = true;
  a.gpu_util_pct = 40;
  a.gpu_mem_peak_bytes = 1000;
  b.gpu_util_pct = 80;
  b.gpu_mem_peak_bytes = 3000;
  const Json e = combine_epoch({a, b, cpu});
  EXPECT_DOUBLE_EQ(e.at("gpu_util_pct").as_number(), 60.0);  // over the workers that sampled a GPU
  EXPECT_EQ(e.at("gpu_mem_peak_bytes").as_number(), 3000.0);
  EXPECT_DOUBLE_EQ(e.at("workers").elements()[1].at("gpu_util_pct").as_number(), 80.0);
  EXPECT_FALSE(e.at("workers").elements()[2].has("gpu_util_pct"));
  RunTotals totals;
  totals.add_epoch(e);
  a.gpu_util_pct = 20;
  a.epoch_s = b.epoch_s = 6.0;  // three times as long: weighs three times as much
  a.gpu_mem_peak_bytes = 5000;
  b.gpu_util_pct = 20;
  totals.add_epoch(combine_epoch({a, b}));
  const Json s = totals.summary(10.0);
  EXPECT_DOUBLE_EQ(s.at("gpu_util_pct").as_number(), (60.0 * 2 + 20.0 * 6) / 8);
  EXPECT_EQ(s.at("gpu_mem_peak_bytes").as_number(), 5000.0);
}

TEST(GpuSampler, AnOutOfRangeUtilisationIsRefused) {
  WorkerEpochReport r = report(0);
  r.has_gpu = true;
  r.gpu_util_pct = 42;
  Json j = r.to_json();
  j.set("gpu_util_pct", 140.0);
  EXPECT_THROW(WorkerEpochReport::from_json(j), Error);
}

}  // namespace
}  // namespace pshard
