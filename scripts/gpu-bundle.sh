#!/bin/bash
# Packs what the GPU machine needs to run pshard into the git-ignored folder .gpubundle/ (copy it there):
# pshard-gpu.tar.xz holds a CUDA build of pshard (sm_80 + sm_90), every `gpu`-labelled test binary, every shared library they resolve
# except glibc, libstdc++/libgcc_s and CUDA's own (the GPU machine has those, and cuBLASLt alone is 541 MB),
# and the configs and scripts scripts/gpu-check.sh runs there; fashion-mnist/ beside it the four IDX files as they
# are (gzip: xz would not shrink them). xz, not gzip, for the rest: OpenBLAS and oneDNN are 75 MB, and the whole
# carried tree must stay under 64 MiB (tar.gz of everything was 58 MiB).
#
#   scripts/gpu-bundle.sh            # builds in build/ (configured like main's, so ccache serves the objects)
#   BUILD=build-gpu scripts/gpu-bundle.sh
#
# Fails, naming them, when a library would be left to the GPU machine that is not glibc's, libstdc++'s or CUDA's.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
OUTDIR=.gpubundle
JOBS=${JOBS:-2}

die() { echo "gpu-bundle: $*" >&2; exit 1; }

# ---- build: CUDA on; the architectures are cmake/PshardCuda.cmake's default (sm_80 code, sm_90 code + PTX) ----
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPSHARD_CUDA=ON -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache > /dev/null
# The gpu tests as ctest knows them (name = target); the throughput tool is what the ResNet-20 comparison runs.
mapfile -t GPU_TESTS < <(ctest --test-dir "$BUILD" -L gpu -N 2>/dev/null | sed -n 's/^ *Test *#[0-9]*: //p')
[ ${#GPU_TESTS[@]} -gt 0 ] || die "ctest -L gpu -N lists no test in $BUILD (was it configured with tests on?)"
nice -n 5 cmake --build "$BUILD" -j "$JOBS" --target pshard pshard_c models_cuda_throughput "${GPU_TESTS[@]}"

BINS=("$BUILD/bin/pshard" "$BUILD/tests/models_cuda_throughput")
for t in "${GPU_TESTS[@]}"; do BINS+=("$BUILD/tests/$t"); done
for b in "${BINS[@]}"; do [ -x "$b" ] || die "$b was not built"; done
# The C API library, for the Python package's CUDA runs (PSHARD_LIBRARY); python/ and examples/ travel with the tree.
CLIB="$BUILD/lib/libpshard_c.so"
[ -f "$CLIB" ] || die "$CLIB was not built"
# The CUDA runtime is linked statically (cmake/PshardCuda.cmake): no libcudart in ldd's list; its driver library,
# libcuda.so.1, is the one it opens at run time.
strings -a "$BUILD/bin/pshard" | grep -x 'libcuda.so.1' > /dev/null ||
  die "$BUILD/bin/pshard holds no CUDA runtime (PSHARD_CUDA off or nvcc not found?)"
# The GPU code the build generates (nvcc's --generate-code flags of pshard_models; no cuobjdump in every toolkit).
ARCHS=$(grep -ho 'code=\[[a-z0-9_,]*\]' "$BUILD/models/CMakeFiles/pshard_models.dir/flags.make" | grep -o 'sm_[0-9]*' |
  sort -u | paste -sd' ')
[[ " $ARCHS " == *" sm_80 "* && " $ARCHS " == *" sm_90 "* ]] || die "$BUILD builds GPU code for '$ARCHS', not sm_80 and sm_90"

# ---- stage ----
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
B="$STAGE/pshard-gpu"
mkdir -p "$B/bin" "$B/lib" "$B/share/configs" "$B/share/bench"
cp "${BINS[@]}" "$B/bin/"

# Left to the GPU machine: the C library and loader, the C++ runtime, and CUDA's libraries.
provided_by_target() {
  case "$1" in
    libc.so.* | libm.so.* | libdl.so.* | librt.so.* | libpthread.so.* | libresolv.so.* | libutil.so.* | ld-linux*) return 0 ;;
    libstdc++.so.* | libgcc_s.so.*) return 0 ;;
    libcuda.so.* | libcudart.so.* | libcublas.so.* | libcublasLt.so.* | libcudnn*.so.* | libnvrtc*.so.*) return 0 ;;
  esac
  return 1
}

cp "$CLIB" "$B/lib/"
for b in "${BINS[@]}" "$CLIB"; do ldd "$b"; done | awk '/=> \//{print $1, $3}' | sort -u | while read -r name path; do
  provided_by_target "$name" || cp -L "$path" "$B/lib/$name"
done

# ---- closure: with only the bundle on the library path, everything resolves to the bundle or to what the target has ----
left=$(for f in "$B"/bin/* "$B"/lib/*; do LD_LIBRARY_PATH="$B/lib" ldd "$f"; done |
  awk '/not found/{print $1; next} /=> \//{print $1, $3}' | sort -u | while read -r name path; do
    case "$path" in "$B"/lib/*) continue ;; esac
    provided_by_target "$name" || echo "$name (${path:-not found})"
  done)
[ -z "$left" ] || die "libraries neither bundled nor provided by the GPU machine: $(echo "$left" | paste -sd, -)"
# cuBLAS and cuDNN are not in ldd's list: make_cuda_backend dlopens them (models/cuda/cuda_libraries.cc). Their sonames
# are string literals in the executable; DLOPENED tells scripts/gpu-check.sh what to look for on the GPU machine.
DLOPENED=$(strings -a "$B/bin/pshard" | grep -xE 'lib(cublas|cudnn)\.so\.[0-9]+' | sort -u)
[[ $DLOPENED == *libcublas.so.* && $DLOPENED == *libcudnn.so.* ]] ||
  die "$BUILD/bin/pshard names no libcublas.so.N and libcudnn.so.N to dlopen (found: '${DLOPENED//$'\n'/ }')"
echo "$DLOPENED" > "$B/DLOPENED"
echo "library closure: complete; left to the GPU machine:"
for f in "$B"/bin/*; do LD_LIBRARY_PATH="$B/lib" ldd "$f"; done | awk '/=> \//{print "  " $1}' | sort -u |
  while read -r name; do if provided_by_target "$name"; then echo "  $name"; fi; done
echo "$DLOPENED" | sed 's/.*/  & (dlopened by the CUDA backend)/'
echo "highest symbol versions needed: $(for f in "$B"/bin/* "$B"/lib/*; do objdump -T "$f"; done 2>/dev/null |
  grep -oE '(GLIBC|GLIBCXX|CXXABI)_[0-9.]+' | sort -t_ -k1,1 -k2,2V -u |
  awk -F_ '{v[$1]=$0} END {for (k in v) printf "%s ", v[k]}')"

# ---- data, configs, the PyTorch reference ----
rm -rf "$OUTDIR" && mkdir -p "$OUTDIR/fashion-mnist"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  if [ -f "$DATA/$f.gz" ]; then cp "$DATA/$f.gz" "$OUTDIR/fashion-mnist/"; elif [ -f "$DATA/$f" ]; then
    cp "$DATA/$f" "$OUTDIR/fashion-mnist/"
  else
    die "Fashion-MNIST file $f(.gz) not found in $DATA (apt-get install dataset-fashion-mnist, or DATA=DIR)"
  fi
done
cp configs/fmnist_lenet.toml configs/fmnist_lenet_sync.toml "$B/share/configs/"
cp tests/bench/resnet20_gpu_vs_pytorch.py tests/bench/gpu_precision_vs_pytorch.py "$B/share/bench/"
git rev-parse HEAD > "$B/COMMIT" 2>/dev/null || echo unknown > "$B/COMMIT"
echo "$ARCHS" > "$B/CUDA_ARCHS"

tar -C "$STAGE" -cf - pshard-gpu | nice -n 5 xz -T0 -6 > "$OUTDIR/pshard-gpu.tar.xz"
echo "bundle: $OUTDIR $(du -sh "$OUTDIR" | cut -f1) (pshard-gpu.tar.xz $(du -h "$OUTDIR/pshard-gpu.tar.xz" | cut -f1)," \
  "unpacked $(du -sh "$B" | cut -f1); fashion-mnist $(du -sh "$OUTDIR/fashion-mnist" | cut -f1));" \
  "binaries: $(cd "$B/bin" && ls | paste -sd' '); libraries: $(ls "$B/lib" | wc -l); GPU code: $ARCHS"
