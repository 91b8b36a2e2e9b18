#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the history's trials: Debian's
# packages (installed by `install` where missing), a cluster in a new
# directory under /tmp on 127.0.0.1:PORT with password authentication
# (user `servegate`, its password in DIR/password), stopped and removed
# by `stop`.
#
#   scripts/postgres.sh install       apt-get install postgresql where there is none
#   scripts/postgres.sh bin           the directory of initdb and pg_ctl, or exit 1
#   scripts/postgres.sh start PORT    prints the cluster's DIR, then its URL (no password)
#   scripts/postgres.sh start PORT tls  the same, taking TLS connections only: a
#                                     certificate for 127.0.0.1 from a CA made
#                                     for it (DIR/ca.pem, in the URL), openssl
#   scripts/postgres.sh stop DIR
#
# initdb refuses to run as root: as root, the cluster is the `postgres`
# user's.
set -euo pipefail

bin() {
    for d in "$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/x)")" /usr/lib/postgresql/*/bin; do
        if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
            echo "$d"
            return 0
        fi
    done
    return 1
}

as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

case "${1:-}" in
install)
    bin >/dev/null 2>&1 && exit 0
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >/dev/null 2>&1 \
        || { echo "postgres.sh: PostgreSQL could not be installed from Debian's packages" >&2; exit 1; }
    ;;
bin)
    bin
    ;;
start)
    port=$2
    tls=${3:-}
    case $tls in "" | tls) ;; *) echo "usage: $0 start PORT [tls]" >&2; exit 2 ;; esac
    pg=$(bin) || { echo "postgres.sh: no initdb/pg_ctl (install postgresql)" >&2; exit 1; }
    dir=$(mktemp -d "${TMPDIR:-/tmp}/servegate-pg.XXXXXX")
    # A cluster that did not start leaves nothing behind (its CA's key
    # included).
    trap 'rm -rf "$dir"' ERR
    fail() { cat "$1" >&2; rm -rf "$dir"; exit 1; }
    chmod 0755 "$dir"
    head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/password"
    mkdir -p "$dir/data" "$dir/socket"
    if [ "$tls" = tls ]; then
        command -v openssl >/dev/null || { echo "postgres.sh: no openssl for the TLS cluster" >&2; exit 1; }
        (
            cd "$dir"
            openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=servegate test CA" \
                -keyout ca.key -out ca.pem
            openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server.key -out server.csr
            printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' >server.ext
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
                -extfile server.ext -out server.crt
            chmod 0600 server.key
        ) >"$dir/openssl.log" 2>&1 || fail "$dir/openssl.log"
    fi
    if [ "$(id -u)" -eq 0 ]; then
        chown -R postgres "$dir"
    fi
    as_owner "$pg/initdb" -D "$dir/data" -U servegate --pwfile="$dir/password" \
        --auth=scram-sha-256 -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 \
        || fail "$dir/initdb.log"
    options="-p $port -c listen_addresses=127.0.0.1 -k $dir/socket -c fsync=off"
    query="sslmode=disable"
    if [ "$tls" = tls ]; then
        # Over TCP, TLS or nothing: a client that connected, connected so.
        printf 'local all all scram-sha-256\nhostssl all all 127.0.0.1/32 scram-sha-256\n' >"$dir/data/pg_hba.conf"
        options="$options -c ssl=on -c ssl_cert_file=$dir/server.crt -c ssl_key_file=$dir/server.key"
        query="sslmode=require&sslrootcert=$dir/ca.pem"
    fi
    as_owner "$pg/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "$options" start >/dev/null \
        || fail "$dir/server.log"
    echo "$dir"
    echo "postgres://servegate@127.0.0.1:$port/postgres?$query"
    ;;
stop)
    dir=$2
    case "$dir" in */servegate-pg.*) ;; *) echo "postgres.sh: $dir is not a cluster of this script" >&2; exit 2 ;; esac
    pg=$(bin) || exit 0
    [ -d "$dir/data" ] && as_owner "$pg/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
*)
    echo "usage: $0 install | bin | start PORT [tls] | stop DIR" >&2
    exit 2
    ;;
esac
