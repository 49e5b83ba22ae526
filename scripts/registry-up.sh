#!/usr/bin/env bash
# Make sure the registry tests (tests/integration/test_registry_real.py) have what they start: Debian's
# docker-registry (the CNCF distribution server), skopeo (the independent reader) and htpasswd, installed
# with apt as root when missing. Each test module starts and stops its own registry on 127.0.0.1.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

say() { echo "registry-up: $*" >&2; }

missing=()
command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
command -v skopeo >/dev/null 2>&1 || missing+=(skopeo)
command -v htpasswd >/dev/null 2>&1 || missing+=(apache2-utils)
if [ ${#missing[@]} -eq 0 ]; then
    say "docker-registry, skopeo and htpasswd are here"
    exit 0
fi
if ! apt_can_install; then
    say "missing ${missing[*]}, and no root apt-get to install them (Debian: apt-get install ${missing[*]})"
    exit 1
fi
say "installing ${missing[*]} (registry tests)"
apt_install "${missing[@]}"
say "installed ${missing[*]}"
