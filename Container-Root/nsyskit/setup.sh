#!/usr/bin/env bash
# Install the image's components, one per install/<name>.sh, each only when its flag is on.
# Usage: setup.sh [COMPONENT...]   (default: all, in order). The Dockerfile runs one component per
# layer so that a change to one flag or script rebuilds only that layer and the ones after it.
# Flags and versions come from the environment (the Dockerfile's build args), e.g. INSTALL_EFA=true.

set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=install/lib.sh
source "$HERE/install/lib.sh"

ALL=(base python nsys mpi efa nccl-tests ncu)

# flag_of COMPONENT: the setting that switches it on (empty: always installed).
flag_of() {
    case "$1" in
        mpi) echo INSTALL_MPI ;;
        efa) echo INSTALL_EFA ;;
        nccl-tests) echo INSTALL_TESTS ;;
        ncu) echo INSTALL_NCU ;;
        *) echo "" ;;
    esac
}

# The same rules as 'invoke config --check', for builds started without the kit.
if is_true "${INSTALL_EFA:-false}" && ! is_true "${INSTALL_MPI:-false}"; then
    die "INSTALL_EFA=true needs INSTALL_MPI=true"
fi
if is_true "${INSTALL_TESTS:-false}" && ! is_true "${INSTALL_EFA:-false}"; then
    die "INSTALL_TESTS=true needs INSTALL_EFA=true"
fi

components=("$@")
[ ${#components[@]} -gt 0 ] || components=("${ALL[@]}")

trap cleanup_build_ca EXIT
ca_ready=""
for component in "${components[@]}"; do
    script="$HERE/install/$component.sh"
    [ -f "$script" ] || die "unknown component '$component' (known: ${ALL[*]})"
    flag=$(flag_of "$component")
    if [ -n "$flag" ] && ! is_true "${!flag:-false}"; then
        NSYSKIT_COMPONENT=$component log "skipped ($flag=${!flag:-false})"
        continue
    fi
    # The base step installs curl and the CA store; the extra CA is needed only by later downloads.
    if [ -z "$ca_ready" ] && [ "$component" != base ]; then
        use_build_ca
        ca_ready=1
    fi
    NSYSKIT_COMPONENT=$component log "installing"
    # The script names its own failure; `|| exit` keeps this shell from adding a second, vaguer line.
    NSYSKIT_COMPONENT=$component bash "$script" || exit $?
    NSYSKIT_COMPONENT=$component log "done"
done
