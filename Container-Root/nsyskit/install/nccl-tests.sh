#!/usr/bin/env bash
# NCCL tests (INSTALL_TESTS, needs INSTALL_EFA): nccl-tests at NCCL_TESTS_VERSION built with MPI=1
# against the image's CUDA, NCCL and MPI for the gencodes in NCCL_TESTS_GENCODE; binaries go to
# /opt/nccl-tests/bin and onto PATH: those named in nccl-tests-binaries.txt beside this script (the list
# the kit checks NCCL_TESTS against; a listed one the build lacks is a warning, all_reduce_perf an error).
# The compilers are installed and removed in this step when the base image has none. Source:
# NCCL_TESTS_URL (https://, file:// or a path; default GitHub's tag tarball) verified against
# NCCL_TESTS_SHA256. Idempotent: an existing build of the tag is kept.

set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${NCCL_TESTS_VERSION:?NCCL_TESTS_VERSION is required}" "${NCCL_TESTS_URL:=}" "${NCCL_TESTS_SHA256:=}"
: "${NCCL_TESTS_GENCODE:=}" "${NCCL_VERSION:=}" "${OPENMPI_SOURCE:=efa}" "${CUDA_HOME:=/usr/local/cuda}"
is_true "${INSTALL_EFA:-false}" || die "INSTALL_TESTS=true needs INSTALL_EFA=true"
PREFIX=/opt/nccl-tests
STAMP=$PREFIX/.nsyskit-version

pinned_sha256() {
    case "$1" in
        *) echo "" ;;
    esac
}

# mpi_home: the MPI the image runs with (nccl-tests must link the same one).
mpi_home() {
    case "$OPENMPI_SOURCE" in
        efa) for dir in /opt/amazon/openmpi5 /opt/amazon/openmpi; do if [ -d "$dir" ]; then echo "$dir" && break; fi; done ;;
        release) echo /opt/openmpi ;;
        distro) echo /usr/lib/x86_64-linux-gnu/openmpi ;;
    esac
}

# nccl_home: where nccl.h is (NGC images: /usr; a CUDA install: CUDA_HOME).
nccl_home() {
    local dir
    for dir in "${NCCL_HOME:-}" /usr /usr/local "$CUDA_HOME"; do
        if [ -n "$dir" ] && [ -f "$dir/include/nccl.h" ]; then
            echo "$dir"
            return 0
        fi
    done
    echo /usr
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$NCCL_TESTS_VERSION" ]; then
    log "nccl-tests $NCCL_TESTS_VERSION already built"
    exit 0
fi

source_url=${NCCL_TESTS_URL:-https://github.com/NVIDIA/nccl-tests/archive/refs/tags/$NCCL_TESTS_VERSION.tar.gz}
sha=${NCCL_TESTS_SHA256:-$(pinned_sha256 "$NCCL_TESTS_VERSION")}
tmp=$(mktemp -d)
fetch "$source_url" "$sha" "$tmp/nccl-tests.tar.gz"
mkdir "$tmp/src"
tar -xzf "$tmp/nccl-tests.tar.gz" -C "$tmp/src" --strip-components=1 || die "cannot unpack $source_url"

installed_tools=()
if ! have make || ! have g++; then
    installed_tools=(make g++)
    [ "$OPENMPI_SOURCE" = distro ] && installed_tools+=(libopenmpi-dev)
    apt_install "${installed_tools[@]}"
fi
[ -x "$CUDA_HOME/bin/nvcc" ] || warn "no nvcc at $CUDA_HOME/bin/nvcc: nccl-tests need a CUDA devel base image"
nccl=$(nccl_home)
if [ -n "$NCCL_VERSION" ] && [ -f "$nccl/include/nccl.h" ]; then
    found=$(awk '/#define NCCL_(MAJOR|MINOR|PATCH) /{v = v (v ? "." : "") $3} END {print v}' "$nccl/include/nccl.h")
    case "$NCCL_VERSION" in
        "$found"*) ;;
        *) warn "NCCL in the image is $found, NCCL_VERSION says $NCCL_VERSION" ;;
    esac
fi

make_args=(MPI=1 "MPI_HOME=$(mpi_home)" "CUDA_HOME=$CUDA_HOME" "NCCL_HOME=$nccl")
if [ -n "$NCCL_TESTS_GENCODE" ]; then make_args+=("NVCC_GENCODE=$NCCL_TESTS_GENCODE"); fi
log "make ${make_args[*]}"
make -C "$tmp/src" -j"$(nproc)" "${make_args[@]}" >"$tmp/make.log" 2>&1 || {
    tail -n 30 "$tmp/make.log" >&2
    die "building nccl-tests $NCCL_TESTS_VERSION failed (make ${make_args[*]})"
}

mkdir -p "$PREFIX/bin"
binaries="$(dirname "${BASH_SOURCE[0]}")/nccl-tests-binaries.txt"
[ -f "$binaries" ] || die "no list of binaries at $binaries"
while read -r tool; do
    case "$tool" in '' | '#'*) continue ;; esac
    if [ -f "$tmp/src/build/$tool" ]; then
        cp "$tmp/src/build/$tool" "$PREFIX/bin/"
    else
        warn "the nccl-tests $NCCL_TESTS_VERSION build has no $tool (listed in $binaries): NCCL_TESTS cannot run it"
    fi
done <"$binaries"
[ -x "$PREFIX/bin/all_reduce_perf" ] || die "the nccl-tests build produced no all_reduce_perf"
for tool in "$PREFIX"/bin/*_perf; do ln -sf "$tool" /usr/local/bin/; done
echo "$NCCL_TESTS_VERSION" >"$STAMP"

if [ ${#installed_tools[@]} -gt 0 ]; then apt_purge "${installed_tools[@]}"; fi
rm -rf "$tmp"
apt_clean
log "nccl-tests $NCCL_TESTS_VERSION: $(ls "$PREFIX/bin" | tr '\n' ' ')"
