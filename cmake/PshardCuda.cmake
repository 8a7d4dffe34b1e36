# Detects the CUDA toolkit (nvcc, cuBLAS, cuDNN). CUDA is optional: without
# nvcc, or with -DPSHARD_CUDA=OFF, pshard builds the CPU backend only.
# A GPU is never needed to build; it is only needed to run the `gpu` tests.
set(PSHARD_HAVE_CUDA OFF)
if(PSHARD_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Ampere and Hopper as real code, plus PTX for newer GPUs.
      set(CMAKE_CUDA_ARCHITECTURES "80-real;90")
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    # cuDNN: the toolkit's, or one named with -DCUDNN_LIBRARY=... -DCUDNN_INCLUDE_DIR=... (or CUDNN_ROOT). pip's
    # nvidia-cudnn wheels ship only libcudnn.so.9, no unversioned libcudnn.so: the versioned name is accepted too.
    find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
                 HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64
                 PATH_SUFFIXES lib lib64)
    find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
              /usr/local/cuda/include PATH_SUFFIXES include)
    if(NOT CUDNN_LIBRARY OR NOT CUDNN_INCLUDE_DIR)
      message(FATAL_ERROR "nvcc found at ${CMAKE_CUDA_COMPILER} but cuDNN was not (library: ${CUDNN_LIBRARY}, "
                          "header: ${CUDNN_INCLUDE_DIR}); install cuDNN, name it with -DCUDNN_LIBRARY=PATH "
                          "-DCUDNN_INCLUDE_DIR=DIR or -DCUDNN_ROOT=DIR, or configure with -DPSHARD_CUDA=OFF")
    endif()
    # Configure-time check: a CUDA translation unit that uses cuBLAS and
    # cuDNN headers compiles and links. A broken toolkit fails here, not
    # half-way through the build.
    try_compile(PSHARD_CUDA_TU_COMPILES
      SOURCES ${CMAKE_SOURCE_DIR}/cmake/cuda_probe.cu
      CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${CUDNN_INCLUDE_DIR}"
      LINK_LIBRARIES CUDA::cublas CUDA::cudart ${CUDNN_LIBRARY}
      OUTPUT_VARIABLE PSHARD_CUDA_PROBE_LOG)
    if(NOT PSHARD_CUDA_TU_COMPILES)
      message(FATAL_ERROR "nvcc found but a CUDA translation unit does not compile:\n"
                          "${PSHARD_CUDA_PROBE_LOG}\nConfigure with -DPSHARD_CUDA=OFF to skip CUDA.")
    endif()
    message(STATUS "pshard: CUDA translation unit compiles with ${CMAKE_CUDA_COMPILER} "
                   "(CUDA ${CMAKE_CUDA_COMPILER_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES})")
    set(PSHARD_HAVE_CUDA ON)
  else()
    message(STATUS "pshard: nvcc not found; building the CPU backend only")
  endif()
endif()
