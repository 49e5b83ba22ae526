#!/usr/bin/env bash
# Make sure the registry tests (tests/integration/test_registry_real.py) have what they start: Debian's
# docker-registry (the CNCF distribution server), skopeo (the independent reader) and htpasswd, installed
# with apt as root when missing. Each test module starts and stops its own registry on 127.0.0.1.
set -euo pipefail

say() { echo "registry-up: $*" >&2; }

missing=()
command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
command -v skopeo >/dev/null 2>&1 || missing+=(skopeo)
command -v htpasswd >/dev/null 2>&1 || missing+=(apache2-utils)
if [ ${#missing[@]} -eq 0 ]; then
    say "docker-registry, skopeo and htpasswd are here"
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "missing ${missing[*]}, and no root apt-get to install them (Debian: apt-get install ${missing[*]})"
    exit 1
fi
say "installing ${missing[*]} (registry tests)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null || say "apt-get update failed; trying the cached package lists"
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
say "installed ${missing[*]}"
