#!/usr/bin/env bash
# The Python side of the example: torch (unless the base image has it), transformers, nvtx, numpy.
# Installed into the system python3 so that every launcher (docker exec, mpirun over ssh, Slurm,
# Kubernetes) finds it without a special PATH. Sources: PyPI, or PIP_WHEELHOUSE first
# (a folder in the image or an http(s) URL of a wheel listing; the kit serves a host folder over HTTP).
# Settings: TORCH_VERSION, PIP_WHEELHOUSE. Idempotent: pip leaves satisfied pins alone.

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

requirements=(-r "$HERE/python-requirements.txt")
if python3 -c 'import torch' 2>/dev/null; then
    log "torch $(python3 -c 'import torch; print(torch.__version__)') comes with the base image; keeping it"
else
    [ -n "${TORCH_VERSION:-}" ] || die "the base image has no torch and TORCH_VERSION is empty"
    # The full lock applies only with our own torch: a base image's torch brings its own dependency set.
    requirements+=("torch==${TORCH_VERSION}" -c "$HERE/python-constraints.txt")
fi

"${pip[@]}" "${requirements[@]}" || die "pip install failed (see the log above)"
python3 - <<'EOF' || die "the example's packages do not import"
import nvtx, torch, transformers
import dotenv, invoke, matplotlib  # the image's nsyskit (analyze-part, analyze-merge)
print(f"nsyskit[python]: torch {torch.__version__}, transformers {transformers.__version__}, nvtx ok")
EOF
