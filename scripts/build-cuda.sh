#!/usr/bin/env bash
# Builds the CUDA `aegis` binary (candle's CUDA backend), on a machine with or without a GPU.
#
#   scripts/build-cuda.sh                         # toolkit if needed, then build for sm_90 (H100/H200)
#   CUDA_COMPUTE_CAP=89 scripts/build-cuda.sh     # another GPU generation (80 A100, 86 RTX 30xx, 89 40xx)
#   CUDA_RUNTIME=13 scripts/build-cuda.sh         # link CUDA 13's libraries (driver 580+, PyTorch cu130)
#   scripts/build-cuda.sh --engine-tests          # the engine's CUDA test binary; prints its path
#
# Toolkit: an `nvcc` 12.x already on PATH (or in /usr/local/cuda) is used as is. Otherwise the script
# takes CUDA 12.4 from Debian's `non-free` component: the `nvidia-cuda-toolkit`, `nvidia-cuda-dev`,
# `libnvvm4` and `libcudart12` packages (and the `libcu++-dev`, `libthrust-dev` and `libcub-dev` headers from main) of Debian 13 (trixie), fetched from deb.debian.org with
# their sha256 checked through Debian's signed InRelease as apt does, and unpacked (not installed) into
# ~/.cache/aegis/cuda-12.4, so the system's libraries are untouched and the binary still runs on
# older glibc. Debian 12's own toolkit is CUDA 11.8, which cannot build candle's kernels for Hopper
# (they target sm_90a, new in CUDA 12) and links libcudart.so.11, absent beside today's drivers.
#
# Without a GPU, nvcc cannot ask the card its compute capability, so it comes from CUDA_COMPUTE_CAP
# (default 90). Output: target/cuda/release/aegis (its own target directory, so the CPU build's
# cache is untouched). At run time the binary needs the NVIDIA driver, libcudart.so.12 and cuBLAS 12
# (a CUDA 12 install, or the nvidia-*-cu12 wheels PyTorch brings) on the library path.
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${AEGIS_CACHE:-$HOME/.cache/aegis}"
toolkit="$cache/cuda-12.4"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

nvcc_major() { "$1" --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p'; }

find_nvcc() {
    for candidate in "$(command -v nvcc || true)" /usr/local/cuda/bin/nvcc "$toolkit/bin/nvcc"; do
        local major=0
        [[ -n "$candidate" && -x "$candidate" ]] && major="$(nvcc_major "$candidate")"
        if ((${major:-0} >= 12)); then
            echo "$candidate"
            return
        fi
    done
    return 1
}

unpack_debian_toolkit() {
    local work index
    work="$(mktemp -d)"
    echo "build-cuda: fetching CUDA 12.4 from Debian trixie non-free (about 1 GiB, once)" >&2
    index="$work/Packages"
    # The same chain of trust apt uses: the signed InRelease names each index's sha256, and each
    # index names each package's.
    curl -fsSL -o "$work/InRelease" "$mirror/dists/trixie/InRelease"
    gpgv --keyring /usr/share/keyrings/debian-archive-keyring.gpg "$work/InRelease" 2>/dev/null || {
        echo "build-cuda: trixie's InRelease signature does not verify against the Debian keyring" >&2
        exit 1
    }
    for component in non-free main; do
        local path="$component/binary-amd64/Packages.xz" want
        want="$(awk -v f="$path" '/^SHA256:/{s=1; next} /^[^ ]/{s=0} s && $3==f {print $1}' "$work/InRelease")"
        curl -fsSL -o "$work/index.xz" "$mirror/dists/trixie/$path"
        echo "$want  $work/index.xz" | sha256sum --check --quiet
        xz -dc "$work/index.xz" >>"$index"
    done
    # From main: libcu++ (<nv/target>, which the CUDA 12 headers include), and thrust and cub, which
    # candle's mixture-of-experts kernels include.
    for pkg in nvidia-cuda-toolkit nvidia-cuda-dev libnvvm4 libcudart12 libcu++-dev libthrust-dev libcub-dev; do
        local filename sha
        filename="$(awk -v p="$pkg" '$1=="Package:"{hit=($2==p)} hit&&$1=="Filename:"{print $2; exit}' "$index")"
        sha="$(awk -v p="$pkg" '$1=="Package:"{hit=($2==p)} hit&&$1=="SHA256:"{print $2; exit}' "$index")"
        [[ -n "$filename" && -n "$sha" ]] || { echo "build-cuda: $pkg missing from the index" >&2; exit 1; }
        curl -fsSL -o "$work/$pkg.deb" "$mirror/$filename"
        echo "$sha  $work/$pkg.deb" | sha256sum --check --quiet
        dpkg-deb -x "$work/$pkg.deb" "$work/root"
        rm "$work/$pkg.deb"
    done
    # NVIDIA's own layout, which nvcc finds everything from (see nvcc.profile below).
    local src="$work/root/usr/lib/nvidia-cuda-toolkit" libs="$work/root/usr/lib/x86_64-linux-gnu"
    rm -rf "$toolkit.partial" && mkdir -p "$toolkit.partial"/{bin,lib64,nvvm}
    cp -a "$src/bin/nvcc" "$src/bin/cicc" "$src/bin/crt" "$toolkit.partial/bin/"
    cp -a "$work/root/usr/bin"/{ptxas,fatbinary,nvlink,cudafe++,bin2c} "$toolkit.partial/bin/"
    cp -a "$src/libdevice" "$toolkit.partial/nvvm/libdevice"
    cp -a "$work/root/usr/include" "$toolkit.partial/include"
    cp -a "$libs"/libcudart.so* "$libs"/libcudart_static.a "$libs"/libnvvm.so* "$toolkit.partial/lib64/"
    # Link-time stand-ins for the driver, cuBLAS, cuRAND and NVRTC, which candle links dynamically;
    # the real ones come from the machine that runs the binary.
    cp -a "$libs/stubs" "$toolkit.partial/lib64/stubs"
    cat >"$toolkit.partial/bin/nvcc.profile" <<'PROFILE'
TOP                = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH   += $(TOP)/lib64:
PATH              += $(_HERE_):
INCLUDES          += "-I$(TOP)/include" $(_SPACE_)
LIBRARIES          =+ $(_SPACE_) "-L$(TOP)/lib64"
PROFILE
    rm -rf "$toolkit" && mv "$toolkit.partial" "$toolkit"
    rm -rf "$work"
}

# CUDA 13 runtime libraries to link against (CUDA_RUNTIME=13): NVIDIA's own PyPI wheels, the ones
# PyTorch's cu130 builds install, pinned by sha256. Only their shared libraries are kept, each with
# the unversioned name the linker looks for, in a folder laid out like a toolkit's lib64 so that it
# can stand as CUDA_HOME for cudarc's link search.
cuda13_libs="$cache/cuda13-libs"
fetch_cuda13_libs() {
    [[ -f "$cuda13_libs/.complete" ]] && return
    local work
    work="$(mktemp -d)"
    echo "build-cuda: fetching cuBLAS, NVRTC, cuRAND and the runtime of CUDA 13.0 from PyPI (about 600 MiB, once)" >&2
    cat >"$work/requirements.txt" <<'REQ'
nvidia-cublas==13.0.2.14 --hash=sha256:0cf238ffdbe46c00cb9aa98e7bca745c223a5ca5a53e686ac8b3e5a08fe80d6c
nvidia-cuda-nvrtc==13.0.88 --hash=sha256:ad9b6d2ead2435f11cbb6868809d2adeeee302e9bb94bcf0539c7a40d80e8575
nvidia-cuda-runtime==13.0.96 --hash=sha256:7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548
nvidia-curand==10.4.5.25 --hash=sha256:22bb226a857e5888fe6b54ae465fc4371296bcff13a35f79e19691bcf454f529
REQ
    "${PYTHON:-python3}" -m pip download --quiet --no-deps --only-binary=:all: --require-hashes \
        --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
        --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux_2_12_x86_64 --platform manylinux2010_x86_64 \
        -r "$work/requirements.txt" -d "$work/wheels"
    local lib64="$cuda13_libs.partial/lib64"
    rm -rf "$cuda13_libs.partial" && mkdir -p "$lib64"
    for wheel in "$work"/wheels/*.whl; do
        unzip -q -j -o "$wheel" 'nvidia/cu13/lib/*.so*' -d "$lib64"
    done
    for lib in cublas cublasLt nvrtc cudart; do ln -sf "lib$lib.so.13" "$lib64/lib$lib.so"; done
    ln -sf libcurand.so.10 "$lib64/libcurand.so"
    touch "$cuda13_libs.partial/.complete"
    rm -rf "$cuda13_libs" && mv "$cuda13_libs.partial" "$cuda13_libs"
    rm -rf "$work"
}

if ! nvcc="$(find_nvcc)"; then
    command -v dpkg-deb >/dev/null && command -v xz >/dev/null && command -v gpgv >/dev/null || {
        echo "build-cuda: no CUDA 12 nvcc found, and unpacking Debian's needs dpkg-deb, xz and gpgv;" \
            "install the CUDA toolkit 12.x and put nvcc on PATH" >&2
        exit 1
    }
    unpack_debian_toolkit
    nvcc="$toolkit/bin/nvcc"
fi
cuda_home="$(cd "$(dirname "$nvcc")/.." && pwd)"
export PATH="$cuda_home/bin:$PATH" CUDA_HOME="$cuda_home" CUDA_PATH="$cuda_home"
export LIBRARY_PATH="$cuda_home/lib64:$cuda_home/lib64/stubs${LIBRARY_PATH:+:$LIBRARY_PATH}"
echo "build-cuda: $("$nvcc" --version | grep release) ($cuda_home)" >&2

# The CUDA runtime the binary links: 12 (libcublas.so.12 and friends, a CUDA 12 install) or 13
# (a CUDA 13 install, or PyTorch's cu130 wheels). One binary cannot serve both: the libraries'
# symbols are versioned by major. nvcc 12.4 builds the kernels either way (PTX and sm_90a code,
# which newer drivers run); only the libraries linked and cudarc's bindings differ.
case "${CUDA_RUNTIME:-12}" in
12) ;;
13)
    fetch_cuda13_libs
    # The driver's link-time stand-in is the same for both.
    cp -n "$cuda_home/lib64/stubs/libcuda.so" "$cuda13_libs/lib64/"
    export CUDARC_CUDA_VERSION=13000 CUDA_HOME="$cuda13_libs" CUDA_PATH="$cuda13_libs"
    export LIBRARY_PATH="$cuda13_libs/lib64:$LIBRARY_PATH"
    ;;
*)
    echo "build-cuda: CUDA_RUNTIME must be 12 or 13" >&2
    exit 2
    ;;
esac

export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
export CARGO_TARGET_DIR="${CUDA_TARGET_DIR:-target/cuda}"
if [[ "${1:-}" == --engine-tests ]]; then
    # The engine's integration-test binary, for scripts/pack-gpu.sh: its path on standard output.
    cargo test --release --locked -p aegis-engine --features cuda --no-run --message-format=json-render-diagnostics \
        | sed -n 's/.*"executable":"\([^"]*\/tests-[^"]*\)".*/\1/p' | tail -n 1
    exit
fi
cargo build --release --locked -p aegis-cli --features cuda "$@"
echo "build-cuda: built $CARGO_TARGET_DIR/release/aegis for compute capability $CUDA_COMPUTE_CAP" \
    "and the CUDA ${CUDA_RUNTIME:-12} runtime" >&2
