#!/usr/bin/env bash
# A private PostgreSQL server for parallel grading (docs/INSTRUCTOR.md, "A large class").
#
#   tools/postgres.sh start    # first time: create the cluster in postgres/ (git-ignored); then start it
#   tools/postgres.sh url      # print the gradebook URL: export NBGRADER_DB_URL="$(tools/postgres.sh url)"
#   tools/postgres.sh stop
#
# POSTGRES_DIR=<folder> (absolute, or relative to the repository) keeps the cluster elsewhere
# (default: postgres/ in the repository).
# The server listens on no TCP port, only on a unix socket inside postgres/, and trusts the local
# user: nothing outside this machine can reach it. PostgreSQL's server programs come from the
# operating system (Debian/Ubuntu: `sudo apt-get install postgresql`; macOS: `brew install
# postgresql`); the driver from `.venv/bin/pip install -e ".[postgres]"`. Run as root (containers),
# the server runs as the `postgres` account that the Debian package creates.
set -euo pipefail
cd "$(dirname "$0")/.."
HERE="${POSTGRES_DIR:-postgres}"
case "$HERE" in /*) ;; *) HERE="$PWD/$HERE" ;; esac
DATA="$HERE/data"    # the cluster
SOCKET="$HERE/run"   # the unix socket's folder (its path must stay under ~100 characters)
DB=gradebook

pg_bin() {
    if command -v initdb >/dev/null; then dirname "$(readlink -f "$(command -v initdb)")"; return; fi
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -n "$dir" ] || { echo "PostgreSQL server programs not found (initdb): sudo apt-get install postgresql" >&2; exit 3; }
    echo "$dir"
}

as_owner() {  # PostgreSQL refuses to run as root
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

owner() {
    if [ "$(id -u)" = 0 ]; then echo postgres; else id -un; fi
}

case "${1:-}" in
    start)
        BIN=$(pg_bin)
        mkdir -p "$SOCKET"
        if [ "$(id -u)" = 0 ]; then chown postgres "$HERE" "$SOCKET"; fi
        if [ ! -f "$DATA/PG_VERSION" ]; then
            as_owner "$BIN/initdb" --pgdata="$DATA" --auth=trust --username="$(owner)" --encoding=UTF8 \
                --no-instructions >/dev/null
        fi
        if ! as_owner "$BIN/pg_ctl" --pgdata="$DATA" status >/dev/null 2>&1; then
            as_owner "$BIN/pg_ctl" --pgdata="$DATA" --log="$DATA/server.log" --wait start \
                -o "-c listen_addresses='' -c unix_socket_directories='$SOCKET' -c max_connections=100" >/dev/null
        fi
        if ! as_owner "$BIN/psql" -h "$SOCKET" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1; then
            as_owner "$BIN/createdb" -h "$SOCKET" "$DB"
        fi
        echo "PostgreSQL running; gradebook: $0 url" >&2
        ;;
    url)
        echo "postgresql+psycopg://$(owner)@/$DB?host=$SOCKET"
        ;;
    stop)
        BIN=$(pg_bin)
        if [ -f "$DATA/PG_VERSION" ]; then as_owner "$BIN/pg_ctl" --pgdata="$DATA" --mode=fast stop >/dev/null; fi
        ;;
    *)
        echo "usage: $0 start | url | stop" >&2
        exit 2
        ;;
esac
