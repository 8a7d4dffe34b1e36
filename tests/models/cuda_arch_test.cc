// The CUDA build's architecture list against a GPU's compute capability, without a GPU: real code runs on the same
// major at a higher minor, PTX on anything newer, and a GPU outside the list is refused naming both.
#include "models/cuda_arch.h"

#include <gtest/gtest.h>

#include "models/device.h"

namespace pshard::models {
namespace {

const char* const kDefault = "75-real;80-real;86-real;89-real;90-real;100-real;120-real;121-virtual";

TEST(CudaArch, RealCodeRunsOnItsMajorAtAnyHigherMinor) {
  EXPECT_EQ(cuda_arch_mismatch(7, 5, kDefault), "");  // T4
  EXPECT_EQ(cuda_arch_mismatch(8, 6, kDefault), "");  // RTX 3090, A10
  EXPECT_EQ(cuda_arch_mismatch(8, 7, kDefault), "");  // Jetson Orin: the 8.6 code
  EXPECT_EQ(cuda_arch_mismatch(8, 9, kDefault), "");  // L4
  EXPECT_EQ(cuda_arch_mismatch(9, 0, kDefault), "");  // H100
  EXPECT_EQ(cuda_arch_mismatch(10, 0, kDefault), "");
  EXPECT_EQ(cuda_arch_mismatch(8, 6, "80-real"), "");  // 8.0 code on an 8.6 GPU
  EXPECT_NE(cuda_arch_mismatch(9, 0, "80-real"), "");  // not across majors
}

TEST(CudaArch, PtxRunsOnEveryNewerGpu) {
  EXPECT_EQ(cuda_arch_mismatch(12, 1, kDefault), "");
  EXPECT_EQ(cuda_arch_mismatch(13, 0, kDefault), "");      // a GPU newer than the build
  EXPECT_EQ(cuda_arch_mismatch(10, 0, "80-real;90"), "");  // the old default: 9.0 PTX on a B200
  EXPECT_EQ(cuda_arch_mismatch(8, 0, "80"), "");           // a plain number is both
  EXPECT_NE(cuda_arch_mismatch(8, 6, "90-virtual"), "");   // PTX never runs on an older GPU
}

TEST(CudaArch, AGpuOutsideTheListIsRefusedNamingItsCapabilityAndTheList) {
  const std::string why = cuda_arch_mismatch(7, 0, kDefault);  // V100
  EXPECT_NE(why.find("compute capability 7.0"), std::string::npos) << why;
  EXPECT_NE(why.find(kDefault), std::string::npos) << why;
  EXPECT_NE(why.find("-DCMAKE_CUDA_ARCHITECTURES=70"), std::string::npos) << why;
  const std::string p40 = cuda_arch_mismatch(6, 1, "80-real;90");  // a P40 against the old default
  EXPECT_NE(p40.find("compute capability 6.1 (built for 80-real;90)"), std::string::npos) << p40;
  EXPECT_NE(cuda_arch_mismatch(8, 0, ""), "");
  EXPECT_NE(cuda_arch_mismatch(8, 0, "garbage;-real"), "");
}

TEST(CudaArch, TheBuildKnowsItsList) {
  if (cuda_compiled()) {
    EXPECT_FALSE(cuda_build_archs().empty());
    EXPECT_EQ(cuda_arch_mismatch(9, 0, cuda_build_archs()), "") << cuda_build_archs();  // H100: every default has it
  } else {
    EXPECT_EQ(cuda_build_archs(), "");
  }
}

}  // namespace
}  // namespace pshard::models
