#!/usr/bin/env bash
# Set up everything the demo and the tests need on a fresh Debian/Ubuntu
# machine: the test hosts' system packages (as root) and a virtualenv in
# .venv with the driver, its requirements and tox. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = 0 ]; then
    bash testbed/install-deps.sh
else
    echo "bootstrap: not root, skipping system packages (test hosts need root)" >&2
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.bootstrap-stamp
inputs=$(cat requirements.txt test-requirements.txt setup.cfg \
    upper-constraints.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$inputs" ]; then
    .venv/bin/pip install -q -c upper-constraints.txt pip
    .venv/bin/pip install -q -c upper-constraints.txt \
        -r requirements.txt -r test-requirements.txt tox tox-uv
    .venv/bin/pip install -q -c upper-constraints.txt -e .
    echo "$inputs" > "$stamp"
fi
