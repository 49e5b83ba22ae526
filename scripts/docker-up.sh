#!/usr/bin/env bash
# Make sure a Docker engine answers and the repro base image exists.
#
# Fast and idempotent when both are already there. Where no engine answers and this
# is a root shell with apt: install docker.io and debootstrap, start dockerd in the
# background (log in $REPRO_DOCKERD_LOG), wait for it, then make the base image with
# `repro base-image`. Extra dockerd flags may be given in $REPRO_DOCKERD_FLAGS.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$here/scripts/lib/apt.sh"
repro="${REPRO_BIN:-$here/.venv/bin/repro}"
base="${REPRO_BASE_IMAGE:-repro-base:bookworm}"
log="${REPRO_DOCKERD_LOG:-/var/log/repro-dockerd.log}"
wait_s="${REPRO_DOCKERD_WAIT:-60}"

say() { echo "docker-up: $*" >&2; }

engine_answers() {
    command -v docker >/dev/null 2>&1 && timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1
}

is_root() { [ "$(id -u)" = 0 ]; }

install_packages() {
    local missing=()
    command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
    command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
    [ ${#missing[@]} -eq 0 ] && return 0
    if ! apt_can_install; then
        say "no Docker engine answers and ${missing[*]} cannot be installed here (needs root and apt)"
        say "install Docker yourself, or point DOCKER_HOST at an engine"
        exit 3
    fi
    say "installing ${missing[*]}"
    apt_install "${missing[@]}"
}

dockerd_flags() {
    # Sandboxes and CI VMs often lack iptables/netfilter or overlayfs; only ask the
    # kernel for what it has. Containers run with network "none" unless a run opts in.
    local flags=()
    if ! command -v iptables >/dev/null 2>&1 || ! iptables -t nat -L >/dev/null 2>&1; then
        flags+=(--iptables=false --ip6tables=false --ip-masq=false)
    fi
    if ! grep -qw overlay /proc/filesystems; then
        flags+=(--storage-driver=vfs)
    fi
    # shellcheck disable=SC2206
    flags+=(${REPRO_DOCKERD_FLAGS:-})
    echo "${flags[@]}"
}

start_engine() {
    if pgrep -x dockerd >/dev/null 2>&1; then
        say "dockerd is running but not answering yet; waiting"
    else
        is_root || { say "dockerd is not running and this is not a root shell; start it, or set DOCKER_HOST"; exit 3; }
        local flags
        flags="$(dockerd_flags)"
        say "starting dockerd ${flags} (log: $log)"
        mkdir -p "$(dirname "$log")"
        # Its own session: a Ctrl-C or a kill of the process group that ran this script (make test,
        # a CI step) does not stop the engine other runs use.
        # shellcheck disable=SC2086
        setsid nohup dockerd $flags >>"$log" 2>&1 </dev/null &
    fi
    local i
    for ((i = 0; i < wait_s; i++)); do
        engine_answers && { say "engine up ($(docker version --format '{{.Server.Version}}'))"; return 0; }
        sleep 1
    done
    say "dockerd did not answer within ${wait_s}s; last lines of $log:"
    tail -n 20 "$log" >&2 || true
    exit 3
}

# The Debian packages a base image of this repro holds (repro/backends/baseimage.py PACKAGES, as the
# image's org.repro.packages label lists them): a base made with fewer (before the C++ toolchain that
# torch.compile needs) is made again, once; images built on the old one rebuild on their next run.
base_packages="${REPRO_BASE_PACKAGES:-python3,python3-venv,g++,python3-dev}"

ensure_base_image() {
    if docker image inspect "$base" >/dev/null 2>&1; then
        local has
        has="$(docker image inspect --format '{{ index .Config.Labels "org.repro.packages" }}' "$base" 2>/dev/null || true)"
        [ "$has" = "$base_packages" ] && return 0
        say "base image $base lacks packages ($base_packages); making it again"
    fi
    command -v debootstrap >/dev/null 2>&1 || install_packages
    say "making base image $base (debootstrap; a few minutes)"
    "$repro" base-image --tag "$base"
}

socket_refused() {
    # A running engine whose socket this user may not open: waiting for it would never help.
    local sock="${DOCKER_HOST:-unix:///var/run/docker.sock}"
    sock="${sock#unix://}"
    ! is_root && [ -S "$sock" ] && { [ ! -r "$sock" ] || [ ! -w "$sock" ]; }
}

if ! engine_answers; then
    if socket_refused; then
        say "an engine runs but this user ($(id -un)) may not use its socket; join the docker group, or set DOCKER_HOST"
        exit 3
    fi
    install_packages
    start_engine
fi
ensure_base_image
say "ready: engine $(docker version --format '{{.Server.Version}}'), base image $base"
