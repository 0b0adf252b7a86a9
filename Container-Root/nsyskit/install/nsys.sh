#!/usr/bin/env bash
# The Nsight Systems CLI (nsys) at a pinned version, from one of four sources (NSYS_SOURCE):
#   nvidia      NVIDIA's CLI .deb (default; NSYS_URL/NSYS_SHA256 override the pinned URL and checksum,
#               NSYS_URL may be a file:// URL or a path for air-gapped sites)
#   nvidia-apt  NVIDIA's devtools apt repository (signed by NVIDIA's key), package nsight-systems-cli-VERSION
#   debian      Debian non-free nsight-systems + nsight-systems-target (2022.4)
#   base        already in BASE_IMAGE: found and reused
# Afterwards `nsys` on PATH is this one, and its importer is where nsys looks for it, so reports
# (.nsys-rep) appear instead of a bare .qdstrm. Idempotent: an nsys of the pinned version is kept.

set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${NSYS_SOURCE:=nvidia}" "${NSYS_VERSION:?NSYS_VERSION is required}" "${NSYS_URL:=}" "${NSYS_SHA256:=}"

# Pinned downloads: VERSION -> "URL SHA256" (NVIDIA's Nsight Systems CLI .deb for x86_64).
pinned_deb() {
    case "$1" in
        2025.2.1) echo "https://developer.nvidia.com/downloads/assets/tools/secure/nsight-systems/2025_2/NsightSystems-linux-cli-public-2025.2.1.130-3569061.deb e36f4d1f02a4cc9eae7f2b978416064ccd4c083638e3741abf9c34a7ad15f9f0" ;;
        *) echo "" ;;
    esac
}

nsys_version_of() { "$1" --version 2>/dev/null | grep -oE '[0-9]{4}\.[0-9]+\.[0-9]+(\.[0-9]+)?' | head -n1; }

# find_nsys: the best nsys binary in the image (a versioned NVIDIA install first), or nothing.
find_nsys() {
    local candidate
    for candidate in /opt/nvidia/nsight-systems-cli/"$NSYS_VERSION"*/target-linux-*/nsys \
        /opt/nvidia/nsight-systems/"$NSYS_VERSION"*/target-linux-*/nsys \
        /opt/nvidia/nsight-systems*/*/target-linux-*/nsys /opt/nvidia/nsight-systems*/*/bin/nsys \
        /usr/local/cuda/bin/nsys /usr/lib/nsight-systems/bin/nsys "$(command -v nsys || true)"; do
        if [ -n "$candidate" ] && [ -x "$candidate" ]; then
            readlink -f "$candidate"
            return 0
        fi
    done
}

install_nvidia_deb() {
    local source=$NSYS_URL sha=$NSYS_SHA256 pin
    pin=$(pinned_deb "$NSYS_VERSION")
    if [ -z "$source" ]; then
        [ -n "$pin" ] || die "no pinned download for nsys $NSYS_VERSION: set NSYS_URL (and NSYS_SHA256), or NSYS_SOURCE=nvidia-apt"
        source=${pin% *}
        sha=${sha:-${pin#* }}
    fi
    install_deb "$source" "$sha" nsys-cli
}

install_nvidia_apt() {
    local os arch url
    os=$(. /etc/os-release && echo "${ID}${VERSION_ID/./}")
    arch=$(dpkg --print-architecture)
    url="https://developer.download.nvidia.com/devtools/repos/$os/$arch"
    add_nvidia_apt_repo "$url" nvidia.pub nvidia-devtools
    apt_install "nsight-systems-cli-$NSYS_VERSION"
}

install_debian() {
    is_debian || die "NSYS_SOURCE=debian needs a Debian base image (Debian non-free has nsight-systems)"
    enable_debian_non_free
    # libnvtoolsext1: the NVTX v2 library the example marks its ranges with when torch is a CPU build; nsys
    # 2022.4 records those, but drops the ranges of the 'nvtx' package (NVTX v3 registered strings).
    apt_install nsight-systems nsight-systems-target libnvtoolsext1
}

# link_importer NSYS: nsys runs QdstrmImporter from ../host-linux-x64 next to its real target dir;
# Debian ships the two halves in different trees, so point that path at wherever the importer is.
link_importer() {
    local target_dir host_dir importer
    target_dir=$(dirname "$(readlink -f "$1")")
    host_dir="$(dirname "$target_dir")/host-linux-x64"
    if [ ! -x "$host_dir/QdstrmImporter" ]; then
        importer=$(find /usr/lib /opt/nvidia -name QdstrmImporter -type f -perm -u+x 2>/dev/null | head -n1 || true)
        [ -n "$importer" ] || die "nsys has no QdstrmImporter: reports would stay .qdstrm"
        if [ -e "$host_dir" ] || [ -L "$host_dir" ]; then rm -rf "$host_dir"; fi
        ln -s "$(dirname "$importer")" "$host_dir"
        log "linked the importer: $host_dir -> $(dirname "$importer")"
    fi
    # A stable path for the wrapper's fallback (turn a leftover .qdstrm into a report).
    ln -sf "$host_dir/QdstrmImporter" /usr/local/bin/QdstrmImporter
}

# put_on_path NSYS: every `nsys` a shell can find is this one (NGC images put CUDA's own nsys first).
put_on_path() {
    local nsys=$1 dir
    ln -sf "$nsys" /usr/local/bin/nsys
    IFS=: read -r -a dirs <<<"$PATH"
    for dir in "${dirs[@]}"; do
        if [ -e "$dir/nsys" ] && [ "$(readlink -f "$dir/nsys")" != "$nsys" ]; then
            ln -sf "$nsys" "$dir/nsys"
        fi
    done
}

existing=$(find_nsys || true)
if [ -n "$existing" ] && [ "$(nsys_version_of "$existing")" = "$NSYS_VERSION" ]; then
    log "nsys $NSYS_VERSION already present at $existing"
else
    case "$NSYS_SOURCE" in
        nvidia) install_nvidia_deb ;;
        nvidia-apt) install_nvidia_apt ;;
        debian) install_debian ;;
        base) [ -n "$existing" ] || die "NSYS_SOURCE=base but BASE_IMAGE has no nsys; pick another NSYS_SOURCE" ;;
        *) die "unknown NSYS_SOURCE '$NSYS_SOURCE' (nvidia, nvidia-apt, debian, base)" ;;
    esac
    apt_clean
fi

nsys=$(find_nsys || true)
[ -n "$nsys" ] || die "no nsys binary after installing from $NSYS_SOURCE"
version=$(nsys_version_of "$nsys")
case "$version" in
    "$NSYS_VERSION"*) ;;
    *) die "nsys at $nsys is version ${version:-unknown}, expected $NSYS_VERSION (NSYS_VERSION)" ;;
esac
put_on_path "$nsys"
link_importer "$nsys"
log "nsys $version at $nsys"
