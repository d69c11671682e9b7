#!/usr/bin/env bash
# A private PostgreSQL server for parallel grading (docs/INSTRUCTOR.md, "A large class").
#
#   tools/postgres.sh start    # first time: create the cluster in postgres/ (git-ignored); then start it
#   tools/postgres.sh url      # print the gradebook URL: export NBGRADER_DB_URL="$(tools/postgres.sh url)"
#   tools/postgres.sh stop
#
# POSTGRES_DIR=<folder> (absolute, or relative to the repository) keeps the cluster elsewhere
# (default: postgres/ in the repository).
# Locked down for a shared machine (docs/INSTRUCTOR.md, "Security"): the server listens on no TCP
# port, only on a unix socket in a 0700 folder that no other local account can enter; it lets in
# only connections whose operating-system user (peer authentication) is mapped, in pg_ident.conf, to
# a role: the account that ran `start` as the superuser (the script's own maintenance) and as the
# grading role `grader`, which is no superuser, cannot run programs (no COPY ... TO PROGRAM) and owns
# the gradebook database only. The URL is the grading role's. PostgreSQL's server programs come from the
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
ROLE=grader          # the grading role: owns $DB, nothing more

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

lock_down() {  # who may connect, as whom: rewritten on every start (older clusters trusted everyone)
    as_owner tee "$DATA/pg_hba.conf" >/dev/null <<EOF
# written by tools/postgres.sh: local connections only, each as a role its OS user is mapped to
local all all peer map=course
EOF
    as_owner tee "$DATA/pg_ident.conf" >/dev/null <<EOF
# written by tools/postgres.sh: MAPNAME SYSTEM-USERNAME PG-USERNAME
course $(owner) $(owner)
course $(owner) $ROLE
course $(id -un) $ROLE
EOF
}

case "${1:-}" in
    start)
        BIN=$(pg_bin)
        mkdir -p "$SOCKET"
        if [ "$(id -u)" = 0 ]; then chown postgres "$HERE" "$SOCKET"; fi
        chmod 0700 "$SOCKET"
        if [ ! -f "$DATA/PG_VERSION" ]; then
            as_owner "$BIN/initdb" --pgdata="$DATA" --auth=peer --username="$(owner)" --encoding=UTF8 \
                --no-instructions >/dev/null
        fi
        lock_down
        if ! as_owner "$BIN/pg_ctl" --pgdata="$DATA" status >/dev/null 2>&1; then
            as_owner "$BIN/pg_ctl" --pgdata="$DATA" --log="$DATA/server.log" --wait start \
                -o "-c listen_addresses='' -c unix_socket_directories='$SOCKET' -c unix_socket_permissions=0700 -c max_connections=100" >/dev/null
        else
            as_owner "$BIN/pg_ctl" --pgdata="$DATA" reload >/dev/null
        fi
        sql() { as_owner "$BIN/psql" -h "$SOCKET" -U "$(owner)" -d "$1" -v ON_ERROR_STOP=1 -tAc "$2"; }
        if ! sql postgres "SELECT 1 FROM pg_roles WHERE rolname = '$ROLE'" | grep -q 1; then
            sql postgres "CREATE ROLE $ROLE LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION" >/dev/null
        fi
        if ! sql postgres "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1; then
            as_owner "$BIN/createdb" -h "$SOCKET" -U "$(owner)" --owner="$ROLE" "$DB"
        fi
        sql postgres "ALTER DATABASE $DB OWNER TO $ROLE; REVOKE ALL ON DATABASE $DB FROM PUBLIC" >/dev/null
        sql "$DB" "ALTER SCHEMA public OWNER TO $ROLE" >/dev/null
        echo "PostgreSQL running; gradebook: $0 url" >&2
        ;;
    url)
        echo "postgresql+psycopg://$ROLE@/$DB?host=$SOCKET"
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
