#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests, from this machine's own PostgreSQL binaries (no
# download, no container): trust authentication, a Unix socket in DIR and a free loopback port,
# fsync off (its data is thrown away). Starts in about a second.
#
#   scripts/pg-cluster.sh start DIR   # prints the connection URL (QUIVER_TEST_POSTGRES)
#   scripts/pg-cluster.sh restart DIR # restarts it on the same port (fault tests)
#   scripts/pg-cluster.sh stop DIR    # stops it and removes DIR
#
# The binaries are found through `pg_config --bindir`, else /usr/lib/postgresql/*/bin (newest
# first); scripts/install-test-deps.sh installs them. initdb refuses to run as root, so as root
# the cluster runs as the user `nobody`.
set -euo pipefail

die() {
    echo "error: $*" >&2
    exit 1
}

bindir() {
    local dir
    if command -v pg_config >/dev/null 2>&1; then
        dir="$(pg_config --bindir)"
        [ -x "$dir/initdb" ] && { echo "$dir"; return; }
    fi
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        [ -x "$dir/initdb" ] && { echo "$dir"; return; }
    done
    die "no PostgreSQL server binaries (initdb); run scripts/install-test-deps.sh"
}

# Runs a command as the cluster's owner: `nobody` when we are root.
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u nobody -- "$@"
    else
        "$@"
    fi
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

[ $# -eq 2 ] || die "usage: $0 start|restart|stop DIR"
command="$1"
dir="$2"

case "$command" in
start)
    bin="$(bindir)"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    [ "$(id -u)" = 0 ] && chown nobody "$dir"
    as_owner test -w "$dir" || die "$dir must be reachable and writable by the cluster's owner (nobody when root)"
    as_owner "$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; die "initdb failed"; }
    port="$(free_port)"
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
        -o "-k $dir -p $port -h 127.0.0.1 -F -c max_connections=200" start >/dev/null ||
        { cat "$dir/server.log" >&2; die "the PostgreSQL server did not start"; }
    echo "$port" >"$dir/port"
    echo "postgresql://postgres@127.0.0.1:$port/postgres"
    ;;
restart)
    bin="$(bindir)"
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 restart >/dev/null ||
        { cat "$dir/server.log" >&2; die "the PostgreSQL server did not restart"; }
    ;;
stop)
    [ -d "$dir/data" ] || exit 0
    bin="$(bindir)"
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
*)
    die "usage: $0 start|restart|stop DIR"
    ;;
esac
