#!/usr/bin/env bash
# Installs (as root, with apt-get) exactly what pshard's build, tests and main
# job need. Idempotent: when everything is installed it returns in a second.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake pkg-config clang-format
  # a compiler cache: the test suite builds four configurations (CMakeLists.txt, PSHARD_CCACHE)
  ccache
  # transport and protocol
  libzmq3-dev cppzmq-dev capnproto libcapnp-dev
  # launcher (Boost.Asio), configs, compressed data files
  libboost-dev libtomlplusplus-dev zlib1g-dev
  # image-folder data sets: JPEG (libjpeg-turbo) and PNG decoding
  libjpeg62-turbo-dev libpng-dev
  # mpirun, for the test of `mpirun pshard task` (tests/launcher/scheduler)
  openmpi-bin
  # sshd in network namespaces, for the test of `pshard launch --hosts` (tests/launcher/remote)
  openssh-server openssh-client iproute2
  # CPU compute (OpenBLAS: the reference backend; oneDNN: convolution, pooling, batch norm)
  libopenblas-dev libdnnl-dev
  # tests
  libgtest-dev
  # the wheel's bundled libraries: their names and RUNPATHs (scripts/build_wheel.py)
  patchelf
  # fuzzing (scripts/fuzz.sh: clang's libFuzzer, ASan, UBSan)
  clang libclang-rt-14-dev
  # the real Fashion-MNIST data set (/usr/share/datasets/fashion-mnist)
  dataset-fashion-mnist
  # report plots (tools/plot_report.py)
  python3 python3-matplotlib
  # the Python package (python/pshard), its PyTorch examples and the PyTorch comparison benchmarks
  python3-numpy python3-torch python3-torchvision
  # scripts/make_image_folder.py and the PIL references of the image tests
  python3-pil
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run this script as root (or install them with sudo apt-get install)" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
