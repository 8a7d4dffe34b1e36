// cuBLAS and cuDNN through the dlopen forwarding of models/cuda/cuda_libraries.cc: calls that need no device reach the
// real library, and a library that cannot be opened is an Error naming it (runs without a GPU).
#include "models/cuda/cuda_libraries.h"

#include <cublas_v2.h>
#include <cudnn.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "models/device.h"

namespace pshard::models::cuda {
namespace {

TEST(CudaLibraries, SonamesCarryTheCompiledMajors) {
  EXPECT_EQ(cublas_soname(), "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
  EXPECT_EQ(cudnn_soname(), "libcudnn.so." + std::to_string(CUDNN_MAJOR));
}

TEST(CudaLibraries, CudnnGetVersionIsForwardedToTheLoadedLibrary) {
  load_cuda_libraries();
  void* lib = dlopen(cudnn_soname().c_str(), RTLD_NOW | RTLD_NOLOAD);  // already open: load_cuda_libraries did it
  ASSERT_NE(lib, nullptr) << cudnn_soname() << " is not loaded: " << dlerror();
  using Fn = size_t (*)();
  const auto real = reinterpret_cast<Fn>(dlsym(lib, "cudnnGetVersion"));
  ASSERT_NE(real, nullptr);
  EXPECT_NE(reinterpret_cast<void*>(real), reinterpret_cast<void*>(&cudnnGetVersion))
      << "the executable's cudnnGetVersion is the library's: cuDNN is linked, not forwarded";
  EXPECT_EQ(cudnnGetVersion(), real());
  EXPECT_EQ(cudnnGetVersion() / 10000, static_cast<size_t>(CUDNN_MAJOR));
  EXPECT_STREQ(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM");
  dlclose(lib);  // drops the reference RTLD_NOLOAD took; load_cuda_libraries' stays
}

TEST(CudaLibraries, CublasCreateWithoutAGpuReturnsAStatus) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: " << describe_cuda_devices();
  load_cuda_libraries();
  cublasHandle_t handle = nullptr;
  const cublasStatus_t st = cublasCreate(&handle);
  EXPECT_NE(st, CUBLAS_STATUS_SUCCESS);
  if (st == CUBLAS_STATUS_SUCCESS) cublasDestroy(handle);
}

TEST(CudaLibraries, MissingLibraryIsAnErrorNamingIt) {
  try {
    open_library("libpshard_no_such_library.so.7", "/nonexistent/pshard/lib", "install it");
    FAIL() << "opened a library that does not exist";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot load libpshard_no_such_library.so.7: "), std::string::npos) << what;
    EXPECT_NE(what.find("/nonexistent/pshard/lib/libpshard_no_such_library.so.7"), std::string::npos) << what;
    EXPECT_NE(what.find("(install it)"), std::string::npos) << what;
  }
}

TEST(CudaLibraries, FallbackFolderIsTriedAfterTheSoname) {
  // The library CMake found, by the folder it was found in, as make_cuda_backend tries it; a name that is not on the
  // search path only resolves there.
  Dl_info info{};
  void* lib = dlopen(cudnn_soname().c_str(), RTLD_NOW);
  ASSERT_NE(lib, nullptr) << dlerror();
  ASSERT_NE(dladdr(dlsym(lib, "cudnnGetVersion"), &info), 0);
  const std::string path = info.dli_fname;
  const std::string dir = path.substr(0, path.rfind('/'));
  EXPECT_NE(open_library("./" + cudnn_soname(), dir, "unused"), nullptr);
  dlclose(lib);
}

}  // namespace
}  // namespace pshard::models::cuda
