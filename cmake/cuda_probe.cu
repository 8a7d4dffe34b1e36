// Configure-time probe: proves that nvcc, cuBLAS and cuDNN headers and
// libraries work together before the real CUDA sources are built.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

int main() {
  cublasHandle_t blas = nullptr;
  cudnnHandle_t dnn = nullptr;
  (void)blas;
  (void)dnn;
  scale<<<1, 32>>>(nullptr, 2.0f, 0);
  return cudnnGetVersion() > 0 ? 0 : 1;
}
