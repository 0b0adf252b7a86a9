# shellcheck shell=bash
# Helpers shared by the install scripts: messages, flags, apt, verified downloads, the build-only CA.
# Sourced, never run. Every message names the component so a failing build step says who failed.

set -Eeuo pipefail
# Any command that fails stops the step with a line naming it (a bare exit status says nothing).
trap 'echo "nsyskit[${NSYSKIT_COMPONENT:-setup}]: error: \"$BASH_COMMAND\" failed (exit $?) at $(basename "${BASH_SOURCE[0]}"):$LINENO" >&2' ERR

log() { echo "nsyskit[${NSYSKIT_COMPONENT:-setup}]: $*"; }
warn() { echo "nsyskit[${NSYSKIT_COMPONENT:-setup}]: warning: $*" >&2; }
die() {
    echo "nsyskit[${NSYSKIT_COMPONENT:-setup}]: error: $*" >&2
    exit 1
}

# is_true VALUE: the .env boolean spellings (true/false, 1/0, yes/no, on/off).
is_true() {
    case "${1,,}" in
        true | 1 | yes | on) return 0 ;;
        *) return 1 ;;
    esac
}

have() { command -v "$1" >/dev/null 2>&1; }

# apt_install PKG...: install without recommends; the lists are removed again by apt_clean.
apt_install() {
    have apt-get || die "this base image has no apt-get; nsyskit's install scripts support Debian/Ubuntu bases"
    export DEBIAN_FRONTEND=noninteractive
    if [ -z "${NSYSKIT_APT_UPDATED:-}" ]; then
        apt-get update -qq || die "apt-get update failed (is the Debian/Ubuntu mirror reachable?)"
        NSYSKIT_APT_UPDATED=1
    fi
    apt-get install -y -qq --no-install-recommends "$@" >/tmp/nsyskit-apt.log 2>&1 || {
        tail -n 20 /tmp/nsyskit-apt.log >&2
        die "apt-get install $* failed"
    }
    rm -f /tmp/nsyskit-apt.log
}

# apt_clean: drop package lists and caches so they do not end up in the layer.
apt_clean() {
    have apt-get || return 0
    apt-get clean
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
}

# apt_purge PKG...: remove build-only packages and what only they needed.
apt_purge() {
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq --auto-remove "$@" >/dev/null 2>&1 || warn "could not purge $*"
}

# is_debian: the image is Debian proper (where non-free holds nsys), not Ubuntu.
is_debian() { [ -r /etc/os-release ] && grep -qx 'ID=debian' /etc/os-release; }

# enable_debian_non_free: Debian's contrib and non-free, where the Nsight tools live (minbase images list only
# main); the next apt_install refreshes the lists.
enable_debian_non_free() {
    local suite mirror
    suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
    mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
    echo "deb $mirror $suite contrib non-free non-free-firmware" >/etc/apt/sources.list.d/nsyskit-non-free.list
    NSYSKIT_APT_UPDATED=""
}

# install_deb URL SHA256 NAME: download one .deb (checksum-verified; a path or file:// URL works too) and install it.
install_deb() {
    local tmp
    tmp=$(mktemp -d)
    fetch "$1" "$2" "$tmp/$3.deb"
    apt_install "$tmp/$3.deb"
    rm -rf "$tmp"
}

# add_nvidia_apt_repo URL KEY NAME: NVIDIA's apt repository at URL, signed by the key at URL/KEY, as list NAME;
# the next apt_install refreshes the lists.
add_nvidia_apt_repo() {
    local url=$1 key=$2 name=$3
    apt_install gnupg
    curl -fsSL "$url/$key" | gpg --dearmor --yes -o "/usr/share/keyrings/$name.gpg" ||
        die "cannot fetch NVIDIA's repository key from $url/$key"
    echo "deb [signed-by=/usr/share/keyrings/$name.gpg] $url/ /" >"/etc/apt/sources.list.d/$name.list"
    NSYSKIT_APT_UPDATED=""
}

# sha256_of FILE
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# verify_sha256 FILE EXPECTED LABEL: fail naming the file and both checksums; with no EXPECTED, warn
# with the computed value so the user can pin it (the published checksum is unknown for some sources).
verify_sha256() {
    local file=$1 expected=${2,,} label=$3 actual
    actual=$(sha256_of "$file")
    if [ -z "$expected" ]; then
        warn "$label: no pinned sha256; downloaded file has sha256 $actual (pin it with the matching *_SHA256 setting)"
    elif [ "$actual" != "$expected" ]; then
        die "checksum mismatch for $(basename "$label") ($label): expected sha256 $expected, got $actual"
    else
        log "sha256 verified for $(basename "$label")"
    fi
}

# fetch SOURCE SHA256 DEST: copy or download SOURCE (https://, http://, file:// or an absolute path)
# to DEST and verify it.
fetch() {
    local source=$1 expected=$2 dest=$3
    case "$source" in
        http://* | https://*)
            have curl || die "curl is missing (the base step installs it)"
            log "downloading $source"
            curl -fsSL --retry 3 --connect-timeout 20 -o "$dest" "$source" || die "download failed: $source"
            ;;
        file://*) cp "${source#file://}" "$dest" || die "cannot read $source" ;;
        /*) cp "$source" "$dest" || die "cannot read $source" ;;
        *) die "unsupported source '$source': use an https:// or file:// URL or an absolute path" ;;
    esac
    verify_sha256 "$dest" "$expected" "$source"
}

# use_build_ca: when the kit serves an extra CA bundle for this build (EXTRA_CA_BUNDLE), trust it in
# this process tree only: it lives in a temporary folder that cleanup_build_ca removes before the
# step ends, so no layer keeps it.
NSYSKIT_CA_DIR=""
use_build_ca() {
    [ -n "${NSYSKIT_ASSETS:-}" ] || return 0
    have curl || return 0
    NSYSKIT_CA_DIR=$(mktemp -d /tmp/nsyskit-ca.XXXXXX)
    if curl -fsS -o "$NSYSKIT_CA_DIR/extra.pem" "$NSYSKIT_ASSETS/ca.pem" 2>/dev/null; then
        local system=/etc/ssl/certs/ca-certificates.crt
        { [ -r "$system" ] && cat "$system"; cat "$NSYSKIT_CA_DIR/extra.pem"; } >"$NSYSKIT_CA_DIR/bundle.pem"
        export SSL_CERT_FILE="$NSYSKIT_CA_DIR/bundle.pem" CURL_CA_BUNDLE="$NSYSKIT_CA_DIR/bundle.pem"
        export PIP_CERT="$NSYSKIT_CA_DIR/bundle.pem" REQUESTS_CA_BUNDLE="$NSYSKIT_CA_DIR/bundle.pem"
        log "trusting the extra CA bundle for this step only"
    fi
}

cleanup_build_ca() {
    if [ -n "$NSYSKIT_CA_DIR" ]; then rm -rf "$NSYSKIT_CA_DIR"; fi
}
