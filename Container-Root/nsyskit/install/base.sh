#!/usr/bin/env bash
# Base tools every later step and the run need: CA store, curl, python3 with pip, procps.
# Idempotent: apt skips what is installed. Plain HTTP mirrors need no CA, so this runs before it.

set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

packages=(ca-certificates curl procps)
# python3-pip only where the base has no pip (NGC images ship their own Python and pip).
if ! have python3 || ! python3 -m pip --version >/dev/null 2>&1; then
    packages+=(python3 python3-pip)
fi
apt_install "${packages[@]}"
apt_clean
log "python: $(python3 --version 2>&1), pip: $(python3 -m pip --version | cut -d' ' -f2)"
