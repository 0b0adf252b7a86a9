#!/usr/bin/env bash
# The Nsight Compute CLI (ncu), for PROFILER=ncu, from one of four sources (NCU_SOURCE):
#   base        already in BASE_IMAGE (NGC images ship it): found and reused, whatever its version
#   nvidia      NVIDIA's Nsight Compute .deb at NCU_URL (https://, file:// or a path), checked against NCU_SHA256
#   nvidia-apt  NVIDIA's CUDA apt repository (signed by NVIDIA's key), package nsight-compute-VERSION
#   debian      Debian non-free nsight-compute + nsight-compute-target (2022.3)
# Afterwards `ncu` on PATH is this one. Idempotent: an ncu of NCU_VERSION (any, for base) is kept.

set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${NCU_SOURCE:=base}" "${NCU_VERSION:?NCU_VERSION is required}" "${NCU_URL:=}" "${NCU_SHA256:=}"

# ncu prints "Version 2022.3.0.0 (build ...)": the dotted version.
ncu_version_of() { "$1" --version 2>/dev/null | grep -oE '[0-9]{4}\.[0-9]+\.[0-9]+(\.[0-9]+)?' | head -n1; }

# find_ncu: the best ncu binary in the image (a versioned NVIDIA install first), or nothing.
find_ncu() {
    local candidate
    for candidate in /opt/nvidia/nsight-compute/"$NCU_VERSION"*/ncu /opt/nvidia/nsight-compute/*/ncu \
        /usr/local/cuda/nsight-compute*/ncu /usr/local/cuda/bin/ncu /usr/lib/nsight-compute/ncu \
        "$(command -v ncu || true)"; do
        if [ -n "$candidate" ] && [ -x "$candidate" ]; then
            readlink -f "$candidate"
            return 0
        fi
    done
}

install_nvidia_deb() {
    [ -n "$NCU_URL" ] || die "NCU_SOURCE=nvidia needs NCU_URL (NVIDIA's nsight-compute .deb) and NCU_SHA256; or NCU_SOURCE=nvidia-apt"
    [ -n "$NCU_SHA256" ] || die "NCU_SOURCE=nvidia needs NCU_SHA256 for $NCU_URL (sha256sum of the .deb)"
    install_deb "$NCU_URL" "$NCU_SHA256" nsight-compute
}

install_nvidia_apt() {
    local os arch url
    os=$(. /etc/os-release && echo "${ID}${VERSION_ID/./}")
    arch=$(dpkg --print-architecture)
    [ "$arch" = amd64 ] && arch=x86_64
    url="https://developer.download.nvidia.com/compute/cuda/repos/$os/$arch"
    add_nvidia_apt_repo "$url" 3bf863cc.pub nvidia-cuda
    apt_install "nsight-compute-$NCU_VERSION"
}

install_debian() {
    is_debian || die "NCU_SOURCE=debian needs a Debian base image (Debian non-free has nsight-compute)"
    enable_debian_non_free
    apt_install nsight-compute nsight-compute-target
}

existing=$(find_ncu || true)
if [ -n "$existing" ] && { [ "$NCU_SOURCE" = base ] || [ "$(ncu_version_of "$existing")" = "$NCU_VERSION" ]; }; then
    log "ncu $(ncu_version_of "$existing") already present at $existing"
else
    case "$NCU_SOURCE" in
        nvidia) install_nvidia_deb ;;
        nvidia-apt) install_nvidia_apt ;;
        debian) install_debian ;;
        base) die "NCU_SOURCE=base but BASE_IMAGE has no ncu; pick another NCU_SOURCE (or INSTALL_NCU=false)" ;;
        *) die "unknown NCU_SOURCE '$NCU_SOURCE' (base, nvidia, nvidia-apt, debian)" ;;
    esac
    apt_clean
fi

ncu=$(find_ncu || true)
[ -n "$ncu" ] || die "no ncu binary after installing from $NCU_SOURCE"
version=$(ncu_version_of "$ncu")
if [ "$NCU_SOURCE" != base ]; then
    case "$version" in
        "$NCU_VERSION"*) ;;
        *) die "ncu at $ncu is version ${version:-unknown}, expected $NCU_VERSION (NCU_VERSION)" ;;
    esac
fi
[ "$(readlink -f "$(command -v ncu || true)")" = "$ncu" ] || ln -sf "$ncu" /usr/local/bin/ncu
log "ncu $version at $ncu"
