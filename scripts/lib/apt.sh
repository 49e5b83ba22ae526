# Debian packages for the set-up scripts (scripts/*-up.sh), sourced, not run.
#
#   apt_can_install            true in a root shell with apt-get
#   apt_install PKG...         install PKG... quietly, without recommends (waits up to 300 s for
#                              another apt's lock; a failed `apt-get update` falls back to the cached lists)

apt_can_install() {
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1
}

apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null 2>&1 || echo "apt: apt-get update failed; trying the cached package lists" >&2
    apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 "$@" >/dev/null
}
