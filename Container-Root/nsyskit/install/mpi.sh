#!/usr/bin/env bash
# OpenMPI and SSH for multi-node launch (INSTALL_MPI). OPENMPI_SOURCE picks where MPI comes from:
#   distro   the OS package (openmpi-bin)
#   release  the pinned OpenMPI release tarball (OPENMPI_VERSION; OPENMPI_URL/OPENMPI_SHA256 override),
#            built here with the compilers removed again in the same step
#   efa      the one the EFA installer bundles (installed by efa.sh; this step only sets up SSH)
# SSH: sshd ready to run (/run/sshd, host keys) and a client that never prompts for host keys, as
# mpirun's remote launch needs. Idempotent.

set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${OPENMPI_SOURCE:=distro}" "${OPENMPI_VERSION:=4.1.7}" "${OPENMPI_URL:=}" "${OPENMPI_SHA256:=}"
PREFIX=/opt/openmpi

setup_ssh() {
    apt_install openssh-server openssh-client
    mkdir -p /run/sshd /root/.ssh /etc/ssh/ssh_config.d /etc/ssh/sshd_config.d
    chmod 700 /root/.ssh
    cat >/etc/ssh/ssh_config.d/nsyskit.conf <<'EOF'
# nsyskit: ranks on other nodes are started over ssh by mpirun; host keys are never prompted for.
Host *
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
EOF
    cat >/etc/ssh/sshd_config.d/nsyskit.conf <<'EOF'
# nsyskit: key-only root login for mpirun's remote launch; keys mounted by launchers may be group-readable.
PermitRootLogin prohibit-password
PasswordAuthentication no
StrictModes no
UsePAM no
EOF
    [ -f /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -A
}

install_release() {
    local series=${OPENMPI_VERSION%.*} source=$OPENMPI_URL tmp
    source=${source:-https://download.open-mpi.org/release/open-mpi/v$series/openmpi-$OPENMPI_VERSION.tar.bz2}
    tmp=$(mktemp -d)
    fetch "$source" "$OPENMPI_SHA256" "$tmp/openmpi.tar.bz2"
    local build_deps=(build-essential bzip2 libhwloc-dev)
    apt_install "${build_deps[@]}"
    tar -xjf "$tmp/openmpi.tar.bz2" -C "$tmp" --strip-components=1
    (cd "$tmp" && ./configure --prefix="$PREFIX" --disable-static >/dev/null && make -j"$(nproc)" >/dev/null && make install >/dev/null) ||
        die "building OpenMPI $OPENMPI_VERSION failed"
    apt_purge build-essential libhwloc-dev
    apt_install libhwloc15 || apt_install libhwloc-plugins
    rm -rf "$tmp"
    echo "$PREFIX/lib" >/etc/ld.so.conf.d/nsyskit-openmpi.conf
    ldconfig
    for tool in "$PREFIX"/bin/*; do ln -sf "$tool" /usr/local/bin/; done
}

case "$OPENMPI_SOURCE" in
    distro) have mpirun || apt_install openmpi-bin ;;
    release) [ -x "$PREFIX/bin/mpirun" ] || install_release ;;
    efa) is_true "${INSTALL_EFA:-false}" || die "OPENMPI_SOURCE=efa needs INSTALL_EFA=true (or OPENMPI_SOURCE=distro/release)" ;;
    *) die "unknown OPENMPI_SOURCE '$OPENMPI_SOURCE' (release, efa, distro)" ;;
esac
setup_ssh
apt_clean
if have mpirun; then log "$(mpirun --version 2>&1 | head -n1)"; fi
