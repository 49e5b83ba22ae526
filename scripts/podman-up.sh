#!/usr/bin/env bash
# Make rootless Podman usable for the podman backend's tests, and give an unprivileged user the base image.
#
# Fast and idempotent when everything is there. As root with apt: install Debian's podman, uidmap (newuidmap,
# newgidmap), catatonit (the container's init), slirp4netns and mmdebstrap where missing; open /dev/net/tun
# to users (rootless --network); create the unprivileged user $REPRO_PODMAN_USER (default repro-podman) with
# sub-ids; give that user's Podman storage the overlay driver when the kernel mounts it rootless (else
# Podman's vfs); and load the base image the Docker engine holds into that storage (`docker save | podman
# load`, as the user). Exit 3 with one line where it cannot.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

user="${REPRO_PODMAN_USER:-repro-podman}"
base="${REPRO_BASE_IMAGE:-repro-base:bookworm}"

say() { echo "podman-up: $*" >&2; }
is_root() { [ "$(id -u)" = 0 ]; }
as_user() { (cd / && runuser -u "$user" -- "$@"); }

install_packages() {
    local missing=()
    command -v podman >/dev/null 2>&1 || missing+=(podman)
    command -v newuidmap >/dev/null 2>&1 || missing+=(uidmap)
    [ -x /usr/libexec/podman/catatonit ] || command -v catatonit >/dev/null 2>&1 || missing+=(catatonit)
    command -v slirp4netns >/dev/null 2>&1 || missing+=(slirp4netns)
    command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)  # `repro base-image` without root
    [ ${#missing[@]} -eq 0 ] && return 0
    if ! apt_can_install; then
        say "${missing[*]} missing and no apt here: install Debian's podman and uidmap"
        exit 3
    fi
    say "installing ${missing[*]}"
    apt_install "${missing[@]}"
}

userns_enabled() {
    local clone=/proc/sys/kernel/unprivileged_userns_clone max=/proc/sys/user/max_user_namespaces
    if [ -r "$clone" ] && [ "$(cat "$clone")" = 0 ]; then
        say "user namespaces are disabled for unprivileged users: sysctl kernel.unprivileged_userns_clone=1"
        return 1
    fi
    if [ -r "$max" ] && [ "$(cat "$max")" = 0 ]; then
        say "user namespaces are disabled: sysctl user.max_user_namespaces is 0"
        return 1
    fi
}

ensure_tun() {
    # A rootless container's network (`--network`: slirp4netns) opens /dev/net/tun as the user; Debian
    # makes it 0666, some images and sandboxes leave it 0600 root.
    if [ ! -c /dev/net/tun ]; then
        mkdir -p /dev/net
        mknod -m 0666 /dev/net/tun c 10 200 2>/dev/null || say "no /dev/net/tun: rootless --network will fail"
    fi
    [ -c /dev/net/tun ] && [ "$(stat -c %a /dev/net/tun)" != 666 ] && chmod 0666 /dev/net/tun
    return 0
}

ensure_user() {
    id -u "$user" >/dev/null 2>&1 || { say "creating user $user"; useradd -m -s /bin/bash "$user"; }
    grep -q "^$user:" /etc/subuid || usermod --add-subuids 200000-265535 "$user"
    grep -q "^$user:" /etc/subgid || usermod --add-subgids 200000-265535 "$user"
}

ensure_storage() {
    # Podman 4.3 falls back to vfs (a full copy per layer, and per container with --userns=keep-id);
    # native rootless overlay needs kernel 5.13+. Decided once, before the storage holds anything.
    local home conf
    home="$(getent passwd "$user" | cut -d: -f6)"
    conf="$home/.config/containers/storage.conf"
    [ -f "$conf" ] && return 0
    local driver=vfs probe
    probe="$(mktemp -d)"
    chown "$user" "$probe"
    if as_user podman --root "$probe/root" --runroot "$probe/run" --storage-driver overlay info \
        --format '{{.Store.GraphDriverName}}' 2>/dev/null | grep -qx overlay; then
        driver=overlay
    fi
    as_user podman unshare rm -rf "$probe/root" "$probe/run" 2>/dev/null || true
    rm -rf "$probe"
    as_user mkdir -p "$home/.config/containers"
    printf '[storage]\ndriver = "%s"\n' "$driver" | as_user tee "$conf" >/dev/null
    as_user podman system reset --force >/dev/null 2>&1 || true
    say "storage driver for $user: $driver"
}

ensure_base_image() {
    as_user podman image exists "$base" && return 0
    if ! command -v docker >/dev/null 2>&1 || ! docker image inspect "$base" >/dev/null 2>&1; then
        say "the Docker engine has no base image $base to load (scripts/docker-up.sh makes it)"
        exit 3
    fi
    say "loading base image $base into $user's Podman storage (docker save | podman load)"
    docker save "$base" | as_user podman load -q >/dev/null
}

is_root || { say "not a root shell: the tests' user and packages need root; the podman tests skip"; exit 3; }
install_packages
userns_enabled || exit 3
ensure_tun
ensure_user
ensure_storage
ensure_base_image
say "ready: $(podman --version), user $user, base image $base"
