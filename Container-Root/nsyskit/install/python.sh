#!/usr/bin/env bash
# The Python side of the example: torch (unless the base image has it), transformers, nvtx, numpy.
# Installed into the system python3 so that every launcher (docker exec, mpirun over ssh, Slurm,
# Kubernetes) finds it without a special PATH. Sources: PyPI, or PIP_WHEELHOUSE first
# (a folder in the image or an http(s) URL of a wheel listing; the kit serves a host folder over HTTP).
# Settings: TORCH_VERSION, PIP_WHEELHOUSE. Idempotent: what the base (or an earlier run) installed stays.

set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/lib.sh"

have python3 || die "python3 is missing (the base step installs it)"
pip=(python3 -m pip install --no-cache-dir --disable-pip-version-check --no-input --progress-bar off)
# Debian marks its python3 as externally managed (PEP 668); the image is ours to manage.
export PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore
if [ -n "${PIP_WHEELHOUSE:-}" ]; then
    pip+=(--find-links "$PIP_WHEELHOUSE")
    # pip ignores plain-HTTP links unless the host is trusted (the kit serves the wheelhouse over HTTP).
    case "$PIP_WHEELHOUSE" in
        http://*) host=${PIP_WHEELHOUSE#http://} && pip+=(--trusted-host "${host%%[:/]*}") ;;
    esac
    log "wheelhouse: $PIP_WHEELHOUSE"
fi

# The base image's own Python environment stays as it is (a user's training image, an NGC image, a venv first on
# PATH): a package it already has is kept at its version, only what it lacks is installed into it, and the lock
# below pins only those (pinning one the base has, numpy say, would replace it under the base's own packages).
installed=" $(python3 -m pip list --format=freeze 2>/dev/null | sed 's/==.*//' | tr 'A-Z_' 'a-z-' | tr '\n' ' ') "
has() { local name; name=$(tr 'A-Z_' 'a-z-' <<<"${1%%[=<>!~ ]*}"); [[ "$installed" == *" $name "* ]]; }
requirements=()
while read -r line; do
    if has "$line"; then log "keeping the base image's ${line%%=*}"; else requirements+=("$line"); fi
done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$HERE/python-requirements.txt")
lock=$(mktemp)
trap 'rm -f "$lock"' EXIT
while read -r line; do
    has "$line" || echo "$line" >>"$lock"
done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$HERE/python-constraints.txt")
if python3 -c 'import torch' 2>/dev/null; then
    log "torch $(python3 -c 'import torch; print(torch.__version__)') comes with the base image; keeping it"
else
    [ -n "${TORCH_VERSION:-}" ] || die "the base image has no torch and TORCH_VERSION is empty"
    # The lock applies only with our own torch (a base image's torch brings its own dependency set), to what the base lacks.
    requirements+=("torch==${TORCH_VERSION}" -c "$lock")
fi

if [ "${#requirements[@]}" -gt 0 ]; then
    "${pip[@]}" "${requirements[@]}" || die "pip install failed (see the log above)"
fi
python3 - <<'EOF' || die "the example's packages do not import"
import nvtx, torch, transformers
import dotenv, invoke, matplotlib  # the image's nsyskit (analyze-part, analyze-merge)
print(f"nsyskit[python]: torch {torch.__version__}, transformers {transformers.__version__}, nvtx ok")
EOF
