#!/usr/bin/env bash
# Usage: docker-stand-in-base.sh [DOCKERD_PID_FILE]
#
# Makes `docker build .` work on a machine that reaches Debian's archive and PyPI but no
# container registry: installs docker.io and mmdebstrap when missing, starts dockerd when
# none answers (writing its pid to DOCKERD_PID_FILE, so the caller can stop it), and builds
# stand-ins for the base images (the Dockerfile's, and Debian's that the Swarm stack's
# balancer uses) from Debian packages, tagged with the bases' own names, unless images of
# those names are already there. The Dockerfiles themselves are not changed.
set -euo pipefail

BASE=python:3.11-slim-bookworm
DEBIAN=debian:bookworm-slim
pid_file=${1:-}
here=$(dirname "$0")

"$here/apt-install.sh" dockerd docker.io
"$here/apt-install.sh" mmdebstrap mmdebstrap

if ! docker info > /dev/null 2>&1; then
    log=$(mktemp -t dockerd.XXXXXX.log)
    setsid dockerd > "$log" 2>&1 < /dev/null &
    if [[ -n $pid_file ]]; then
        echo $! > "$pid_file"
    fi
    for _ in $(seq 100); do
        docker info > /dev/null 2>&1 && break
        sleep 0.3
    done
    docker info > /dev/null 2>&1 || { cat "$log" >&2; echo "dockerd did not start" >&2; exit 1; }
fi

if docker image inspect "$BASE" "$DEBIAN" > /dev/null 2>&1; then
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A bookworm root file system with Debian's Python 3.11, imported as an image.
mmdebstrap --quiet --variant=apt --include=python3,python3-venv,python3-pip,ca-certificates \
    bookworm "$work/rootfs.tar"
docker import "$work/rootfs.tar" local/bookworm-py:raw
if ! docker image inspect "$DEBIAN" > /dev/null 2>&1; then
    docker tag local/bookworm-py:raw "$DEBIAN"
fi
if ! docker image inspect "$BASE" > /dev/null 2>&1; then
    # Then made to behave like the official image: `python` and `pip` on PATH, pip allowed to
    # install system-wide, and the host's CA bundle (package traffic may pass a proxy whose
    # certificate only the host trusts).
    mkdir "$work/base"
    cp /etc/ssl/certs/ca-certificates.crt "$work/base/"
    cat > "$work/base/Dockerfile" <<'DOCKERFILE'
FROM local/bookworm-py:raw
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
RUN rm -f /usr/lib/python3.11/EXTERNALLY-MANAGED \
 && ln -sf /usr/bin/python3 /usr/local/bin/python && ln -sf /usr/bin/pip3 /usr/local/bin/pip
DOCKERFILE
    docker build --quiet --tag "$BASE" "$work/base"
fi
docker rmi local/bookworm-py:raw > /dev/null
