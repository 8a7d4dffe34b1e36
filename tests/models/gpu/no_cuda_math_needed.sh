#!/bin/bash
# A CUDA build's executable needs cudart but not cuBLAS or cuDNN: those are dlopened when the first CUDA backend is
# made (models/cuda/cuda_libraries.cc). Fails, naming the entries, if a link brings them back.
# usage: no_cuda_math_needed.sh BINARY
set -euo pipefail
bin=$1
dynamic=$(readelf -d "$bin")
undefined=$(nm -D --undefined-only "$bin")
if ! grep -q "NEEDED.*libcudart" <<<"$dynamic"; then
  echo "$bin: no NEEDED libcudart: not a CUDA build, nothing checked" >&2
  exit 1
fi
bad=$(grep -E "NEEDED.*(libcublas|libcudnn)" <<<"$dynamic"; grep -E "(cublas|cudnn)" <<<"$undefined") || true
if [[ -n $bad ]]; then
  echo "$bin links cuBLAS/cuDNN (they must be dlopened by models/cuda/cuda_libraries.cc):" >&2
  echo "$bad" >&2
  exit 1
fi
echo "$bin: no cuBLAS/cuDNN in NEEDED or undefined symbols"
