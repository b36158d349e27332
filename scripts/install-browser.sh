#!/usr/bin/env bash
# Installs Debian's chromium for the /web browser test (Playwright drives it; it never
# downloads a browser of its own). Does nothing when /usr/bin/chromium is already there.
set -euo pipefail

if [[ -x /usr/bin/chromium ]]; then
    exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
else
    sudo apt-get update
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
fi
