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
      # Real code for the GPUs people train on that this nvcc supports (Turing T4/RTX 20xx 7.5, A100 8.0, RTX 30xx/A10
      # 8.6, L4/RTX 40xx 8.9, H100 9.0, B200 10.0, RTX 50xx 12.0), plus PTX for the newest it knows, which the driver
      # compiles for anything newer. A GPU outside the list is refused at start, by name (models/cuda_arch.h).
      execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --list-gpu-code OUTPUT_VARIABLE PSHARD_NVCC_CODES
                      ERROR_QUIET RESULT_VARIABLE PSHARD_NVCC_LIST_RC)
      execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --list-gpu-arch OUTPUT_VARIABLE PSHARD_NVCC_ARCHS ERROR_QUIET)
      set(PSHARD_DEFAULT_ARCHS "")
      if(PSHARD_NVCC_LIST_RC EQUAL 0)
        foreach(arch 75 80 86 89 90 100 120)
          if(PSHARD_NVCC_CODES MATCHES "sm_${arch}[^0-9]|sm_${arch}$")
            list(APPEND PSHARD_DEFAULT_ARCHS "${arch}-real")
          endif()
        endforeach()
        string(REGEX MATCHALL "compute_[0-9]+" PSHARD_NVCC_VIRTUAL "${PSHARD_NVCC_ARCHS}")
        set(PSHARD_NEWEST 0)
        foreach(v ${PSHARD_NVCC_VIRTUAL})
          string(REPLACE "compute_" "" n "${v}")
          if(n GREATER PSHARD_NEWEST)
            set(PSHARD_NEWEST ${n})
          endif()
        endforeach()
        if(PSHARD_NEWEST GREATER 0)
          list(APPEND PSHARD_DEFAULT_ARCHS "${PSHARD_NEWEST}-virtual")
        endif()
      endif()
      if(NOT PSHARD_DEFAULT_ARCHS)
        set(PSHARD_DEFAULT_ARCHS "80-real;90")  # an nvcc without --list-gpu-code (before CUDA 11)
      endif()
      set(CMAKE_CUDA_ARCHITECTURES "${PSHARD_DEFAULT_ARCHS}")
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
