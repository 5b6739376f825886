#!/usr/bin/env bash
# Runs the whole product locally: SQLite + in-process queue, api, scheduler and a runner,
# with a seeded admin and a demo stack. Extra arguments go to `terraplane dev`.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/terraplane-target}"
scripts/install-protoc.sh >/dev/null
TERRAFORM_BIN="$(scripts/install-terraform.sh | tail -n1)"
export TERRAFORM_BIN
cargo build --quiet -p terraplane -p terraplane-cli
echo "tpctl is at $CARGO_TARGET_DIR/debug/tpctl"
exec "$CARGO_TARGET_DIR/debug/terraplane" dev "$@"
