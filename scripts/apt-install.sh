#!/usr/bin/env bash
# Usage: apt-install.sh COMMAND PACKAGE...
# Installs the Debian PACKAGEs with apt-get unless COMMAND is already on PATH (or is an
# executable path); uses sudo when not run as root.
set -euo pipefail

command_name=$1
shift
if command -v "$command_name" > /dev/null; then
    exit 0
fi

as_root=()
if [[ $(id -u) -ne 0 ]]; then
    as_root=(sudo)
fi
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq "$@"
