# Finds every third-party dependency. All come from Debian packages
# (scripts/install-deps.sh installs them); nothing is downloaded.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

# ZeroMQ (libzmq3-dev) and its header-only C++ binding (cppzmq-dev).
pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET libzmq)
find_path(CPPZMQ_INCLUDE_DIR zmq.hpp REQUIRED)

# Cap'n Proto (capnproto + libcapnp-dev): schemas compiled at build time.
find_package(CapnProto REQUIRED)

# Boost.Asio (libboost-dev, header only).
find_package(Boost 1.74 REQUIRED)

# OpenBLAS (libopenblas-dev): the CPU GEMM.
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)

# oneDNN (libdnnl-dev): the CPU backend's convolution. Found directly: Debian's dnnl-config.cmake also requires
# the OpenCL headers, which the CPU engine does not need.
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp REQUIRED)
find_library(DNNL_LIBRARY dnnl REQUIRED)

# TOML configs (libtomlplusplus-dev).
find_package(tomlplusplus REQUIRED)

# gzip-compressed IDX files (zlib1g-dev).
find_package(ZLIB REQUIRED)

# image-folder data sets: JPEG through libjpeg-turbo (libjpeg62-turbo-dev), PNG through libpng (libpng-dev).
find_package(JPEG REQUIRED)
find_package(PNG REQUIRED)

# OpenMP for CPU kernels that are not GEMM.
find_package(OpenMP REQUIRED COMPONENTS CXX)

if(PSHARD_TESTS)
  find_package(GTest REQUIRED)
endif()
