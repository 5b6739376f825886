#!/usr/bin/env bash
# Installs a local AWS STS for the tests: the PyPI package `moto` runs a server that
# answers AssumeRoleWithWebIdentity and GetCallerIdentity. Into <tools>/moto (default
# <repo>/.tools, override with TERRAPLANE_TOOLS_DIR); idempotent. Prints the path of
# `moto_server` on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
MOTO_VERSION="5.2.5"
tools="${TERRAPLANE_TOOLS_DIR:-$PWD/.tools}"
venv="$tools/moto"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
have="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("moto"))' 2>/dev/null || true)"
if [ "$have" != "$MOTO_VERSION" ]; then
  echo "[install-moto] installing moto[server]==$MOTO_VERSION" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check "moto[server]==$MOTO_VERSION" >&2
fi
echo "$venv/bin/moto_server"
