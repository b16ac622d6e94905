#!/usr/bin/env bash
# Builds the CUDA `aegis` binary (candle's CUDA backend), on a machine with or without a GPU.
#
#   scripts/build-cuda.sh                         # toolkit if needed, then build for sm_90 (H100/H200)
#   CUDA_COMPUTE_CAP=89 scripts/build-cuda.sh     # another GPU generation (80 A100, 86 RTX 30xx, 89 40xx)
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

export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
export CARGO_TARGET_DIR="${CUDA_TARGET_DIR:-target/cuda}"
cargo build --release --locked -p aegis-cli --features cuda "$@"
echo "build-cuda: built $CARGO_TARGET_DIR/release/aegis for compute capability $CUDA_COMPUTE_CAP" >&2
