#!/usr/bin/env bash
# The AWS EFA user-space stack (INSTALL_EFA, needs INSTALL_MPI): libfabric with the efa provider,
# the installer's OpenMPI (used when OPENMPI_SOURCE=efa) and aws-ofi-nccl (bundled by the installer
# at /opt/amazon/ofi-nccl), all through the pinned AWS EFA installer run with the flags containers
# need: no kernel module, no limits.conf, no device check at build time.
# Source: EFA_INSTALLER_URL (https://, file:// or a path; default AWS's URL for EFA_INSTALLER_VERSION)
# verified against EFA_INSTALLER_SHA256. Idempotent: an installed stack of that version is kept.

set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${EFA_INSTALLER_VERSION:?EFA_INSTALLER_VERSION is required}" "${EFA_INSTALLER_URL:=}" "${EFA_INSTALLER_SHA256:=}"
: "${OPENMPI_SOURCE:=efa}"
is_true "${INSTALL_MPI:-false}" || die "INSTALL_EFA=true needs INSTALL_MPI=true"

# The flags AWS's container Dockerfiles use: -y no prompts, -g GPUDirect RDMA support, -d debug
# packages, and no kernel module, no limits.conf, no device check (a build has no EFA device).
INSTALLER_FLAGS=(-y -g -d --skip-kmod --skip-limit-conf --no-verify)
STAMP=/opt/amazon/efa/.nsyskit-installer-version

# Published checksums by version (AWS signs the tarball with GPG; a sha256 is pinned here once known).
pinned_sha256() {
    case "$1" in
        *) echo "" ;;
    esac
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$EFA_INSTALLER_VERSION" ]; then
    log "EFA installer $EFA_INSTALLER_VERSION already installed"
else
    source_url=${EFA_INSTALLER_URL:-https://efa-installer.amazonaws.com/aws-efa-installer-$EFA_INSTALLER_VERSION.tar.gz}
    sha=${EFA_INSTALLER_SHA256:-$(pinned_sha256 "$EFA_INSTALLER_VERSION")}
    tmp=$(mktemp -d)
    fetch "$source_url" "$sha" "$tmp/aws-efa-installer.tar.gz"
    tar -xzf "$tmp/aws-efa-installer.tar.gz" -C "$tmp" || die "cannot unpack $source_url"
    installer=$(find "$tmp" -maxdepth 2 -name efa_installer.sh -type f | head -n1)
    [ -n "$installer" ] || die "$source_url has no efa_installer.sh"
    # The installer uses apt itself: it needs current package lists.
    have apt-get && apt-get update -qq
    log "running efa_installer.sh ${INSTALLER_FLAGS[*]}"
    (cd "$(dirname "$installer")" && bash ./efa_installer.sh "${INSTALLER_FLAGS[@]}") || die "efa_installer.sh ${INSTALLER_FLAGS[*]} failed"
    rm -rf "$tmp"
    mkdir -p "$(dirname "$STAMP")"
    echo "$EFA_INSTALLER_VERSION" >"$STAMP"
fi

# Libraries for every process (also ranks started over ssh, which do not see Docker's ENV).
for lib in /opt/amazon/efa/lib /opt/amazon/efa/lib64 /opt/amazon/ofi-nccl/lib /opt/amazon/ofi-nccl/lib64; do
    if [ -d "$lib" ]; then echo "$lib"; fi
done >/etc/ld.so.conf.d/nsyskit-efa.conf
if [ "$OPENMPI_SOURCE" = efa ]; then
    mpi_home=""
    for dir in /opt/amazon/openmpi5 /opt/amazon/openmpi; do if [ -d "$dir" ]; then mpi_home=$dir && break; fi; done
    [ -n "$mpi_home" ] && [ -x "$mpi_home/bin/mpirun" ] || die "OPENMPI_SOURCE=efa but the EFA installer left no OpenMPI in /opt/amazon"
    echo "$mpi_home/lib" >>/etc/ld.so.conf.d/nsyskit-efa.conf
    for tool in "$mpi_home"/bin/*; do ln -sf "$tool" /usr/local/bin/; done
fi
ldconfig
for tool in /opt/amazon/efa/bin/*; do
    if [ -x "$tool" ]; then ln -sf "$tool" /usr/local/bin/; fi
done
have fi_info || die "the EFA installer left no fi_info"
if ! ls /opt/amazon/ofi-nccl/lib*/libnccl-net*.so >/dev/null 2>&1; then
    warn "no aws-ofi-nccl in /opt/amazon/ofi-nccl: NCCL will not use EFA (use an installer version that bundles it)"
fi
apt_clean
log "EFA $EFA_INSTALLER_VERSION: $(fi_info --version 2>&1 | head -n1)"
