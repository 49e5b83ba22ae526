#!/usr/bin/env bash
# Make sure a headless browser is here for the HTML-report test (tests/integration/test_report_browser.py):
# Debian's chromium, installed with apt as root when missing. Fast and idempotent when present.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

say() { echo "browser-up: $*" >&2; }

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    say "chromium is here"
    exit 0
fi
if ! apt_can_install; then
    say "no chromium, and no root apt-get to install it (Debian: apt-get install chromium)"
    exit 1
fi
say "installing Debian's chromium (headless HTML-report test)"
apt_install chromium
command -v chromium >/dev/null 2>&1
say "chromium $(chromium --version 2>/dev/null | awk '{print $2}') installed"
