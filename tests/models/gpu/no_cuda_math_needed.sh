#!/bin/bash
# A CUDA build's executable carries the CUDA runtime (linked statically: it starts on nodes without CUDA) and needs
# neither libcudart nor cuBLAS or cuDNN: those two are dlopened when the first CUDA backend is made
# (models/cuda/cuda_libraries.cc). Fails, naming the entries, if a link brings any of them back.
# usage: no_cuda_math_needed.sh BINARY
set -euo pipefail
bin=$1
dynamic=$(readelf -d "$bin")
undefined=$(nm -D --undefined-only "$bin")
symbols=$(nm "$bin")
if ! grep -qE " [Tt] cudaGetDeviceCount$" <<<"$symbols"; then
  echo "$bin: no CUDA runtime (cudaGetDeviceCount) inside: not a CUDA build, nothing checked" >&2
  exit 1
fi
bad=$(grep -E "NEEDED.*(libcudart|libcublas|libcudnn)" <<<"$dynamic"; grep -E "(cublas|cudnn|cudaGetDevice)" <<<"$undefined") || true
if [[ -n $bad ]]; then
  echo "$bin needs CUDA's libraries (the runtime is linked statically; cuBLAS/cuDNN are dlopened by" \
    "models/cuda/cuda_libraries.cc):" >&2
  echo "$bad" >&2
  exit 1
fi
echo "$bin: the CUDA runtime inside; no libcudart, cuBLAS or cuDNN in NEEDED or undefined symbols"
