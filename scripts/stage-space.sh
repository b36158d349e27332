#!/usr/bin/env bash
# Usage: stage-space.sh DIR
#
# Assembles in DIR what a Hugging Face Space (Docker SDK) builds and serves: the Dockerfile and
# the files it copies, openenv.yaml, and deploy/space/ (the Space's README card, and the
# client.py and __init__.py that `openenv push` looks for). Then publish it with
#   openenv push DIR --repo-id USER/sqlenv
set -euo pipefail

target=${1:?usage: stage-space.sh DIR}
mkdir -p "$target"
target=$(cd "$target" && pwd)
cd "$(dirname "$0")/.."

git ls-files -z --cached --others --exclude-standard -- \
    Dockerfile .dockerignore pyproject.toml LICENSE openenv.yaml \
    env_core serving sqlenv_mcp doors evals |
    while IFS= read -r -d '' path; do
        if [[ -f $path ]]; then
            cp --parents "$path" "$target"
        fi
    done
cp deploy/space/README.md deploy/space/client.py deploy/space/__init__.py "$target"
