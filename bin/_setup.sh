# shellcheck shell=bash
# Shared set-up for bin/run, bin/test and bench/run. Sourced, never run on its own.
#
# Gives: EVALSITE_ROOT, VENV, PY; find_python, setup_python (venv + requirements),
# ensure_system_packages, load_dotenv, free_port, wait_for_port, start_bg (tracked
# process groups), start_redis and a cleanup that stops every tracked process on EXIT/INT/TERM/HUP.

EVALSITE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$EVALSITE_ROOT/.venv"  # use_venv/setup_python switch to .venv-test for the tests
PY="$VENV/bin/python"
EVALSITE_TAG="${EVALSITE_TAG:-evalsite}"

log() { printf '[%s] %s\n' "$EVALSITE_TAG" "$*" >&2; }
die() {
    printf '[%s] error: %s\n' "$EVALSITE_TAG" "$*" >&2
    exit 1
}

# ---- Python -------------------------------------------------------------------------------
# True when $1 runs, is >= 3.12 and can make a virtualenv with pip in it.
python_ok() {
    [ -n "${1:-}" ] || return 1
    "$1" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1
}

# Print the path of a usable Python >= 3.12. pyenv shims exist for every installed version
# but fail unless that version is selected, so each candidate is run, not just looked up.
# 3.12 comes before 3.13: it is what the project is developed and tested on.
find_python() {
    local candidate version prefix
    if [ -n "${EVALSITE_PYTHON:-}" ]; then
        python_ok "$EVALSITE_PYTHON" && { echo "$EVALSITE_PYTHON"; return 0; }
        die "EVALSITE_PYTHON=$EVALSITE_PYTHON is not a working Python >= 3.12 with venv."
    fi
    for candidate in python3.12 python3.13 python3; do
        candidate="$(command -v "$candidate" 2>/dev/null)" || continue
        python_ok "$candidate" && { echo "$candidate"; return 0; }
    done
    if command -v pyenv >/dev/null 2>&1; then
        for version in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.1[23]\.[0-9]+$' |
            sort -t. -k2,2n -k3,3nr); do
            prefix="$(pyenv prefix "$version" 2>/dev/null)" || continue
            python_ok "$prefix/bin/python3" && { echo "$prefix/bin/python3"; return 0; }
        done
    fi
    for candidate in /usr/bin/python3.12 /usr/bin/python3.13 /usr/local/bin/python3.12 \
        /usr/local/bin/python3.13 "$HOME"/.pyenv/versions/3.12*/bin/python3 \
        "$HOME"/.pyenv/versions/3.13*/bin/python3; do
        python_ok "$candidate" && { echo "$candidate"; return 0; }
    done
    die "no Python >= 3.12 (with venv) found. Install one, e.g. \`apt-get install python3.12 python3.12-venv\` or \`pyenv install 3.12\`, or point EVALSITE_PYTHON at it."
}

# One set-up at a time per checkout and venv (two scripts started at once must not pip into one
# venv; different venvs are built side by side: bin/test builds the tools' while the tests run).
_setup_lock() {
    command -v flock >/dev/null 2>&1 || return 0
    local lock_file="${TMPDIR:-/tmp}/evalsite-setup-$(printf '%s' "$EVALSITE_ROOT" | cksum | cut -d' ' -f1)-${1:-run}.lock"
    exec 8>"$lock_file"
    flock 8
}
_setup_unlock() {
    # fd 8 must not leak into servers started later, or they would hold the lock forever.
    exec 8>&-
}

_requirements_hash() { (cd "$EVALSITE_ROOT" && cat "$@" | sha256sum | cut -d' ' -f1); }

# use_venv run|test|litellm|interop|lmeval: point VENV, PY and VENV_REQUIREMENTS at that kind's venv without
# setting it up. .venv is the users' world: requirements.txt and nothing else (bin/run,
# workers, commands). .venv-test holds requirements-test.txt. They are apart so that a package
# only the tests install can never make the app work in the test run and fail in a user's
# install. .venv-litellm holds an OpenAI-compatible server this project did not write (the
# LiteLLM proxy), which the install stage runs the main job against; it shares nothing with
# the app's packages. .venv-interop and .venv-lmeval hold the evaluation tools whose files
# apps/interop imports (Inspect AI; lm-evaluation-harness): too heavy for .venv-test, built by the
# tests that need them (tests/interop/tools.py) or beside the tests by bin/test.
use_venv() {
    case "${1:-run}" in
        test) VENV="$EVALSITE_ROOT/.venv-test" VENV_REQUIREMENTS="requirements.txt requirements-test.txt" ;;
        litellm) VENV="$EVALSITE_ROOT/.venv-litellm" VENV_REQUIREMENTS="tests/install/requirements-litellm.txt" ;;
        interop) VENV="$EVALSITE_ROOT/.venv-interop" VENV_REQUIREMENTS="tests/interop/requirements-interop.txt" ;;
        lmeval) VENV="$EVALSITE_ROOT/.venv-lmeval" VENV_REQUIREMENTS="tests/interop/requirements-lm-eval.txt" ;;
        *) VENV="$EVALSITE_ROOT/.venv" VENV_REQUIREMENTS="requirements.txt" ;;
    esac
    PY="$VENV/bin/python"
}

# setup_python run|test|litellm|interop|lmeval: a working venv of that kind (see use_venv), made current. pip
# runs only when the requirements changed since the last install. The run venv is then rebuilt
# from nothing, so a package dropped from requirements.txt is gone from it too.
setup_python() {
    local kind="${1:-run}" base req stamp hash
    use_venv "$kind"
    _setup_lock "$kind"
    # The last file names what to install; the ones before it are included by it.
    req="${VENV_REQUIREMENTS##* }"
    # shellcheck disable=SC2086  # a list of file names without spaces
    hash="$(_requirements_hash $VENV_REQUIREMENTS)"
    stamp="$VENV/.evalsite-$kind.sha256"
    local fresh=0
    # Changed requirements, or a .venv from before the split that also holds the test packages.
    if [ "$kind" = run ] && [ -d "$VENV" ] &&
        { [ "$(cat "$stamp" 2>/dev/null)" != "$hash" ] || [ -e "$VENV/.evalsite-test.sha256" ]; }; then
        fresh=1
    fi
    if [ $fresh -eq 1 ] || ! { [ -x "$PY" ] && python_ok "$PY" && "$PY" -m pip --version >/dev/null 2>&1; }; then
        base="$(find_python)" || exit 1
        log "creating ${VENV#"$EVALSITE_ROOT"/} with $base ($("$base" -V 2>&1))"
        rm -rf "$VENV"
        "$base" -m venv "$VENV" || die "could not create $VENV with $base"
    fi
    if [ "$(cat "$stamp" 2>/dev/null)" != "$hash" ]; then
        log "installing Python packages from $req into ${VENV#"$EVALSITE_ROOT"/} (the first time takes a few minutes)"
        # The tools' venvs skip compiling every module at install (most are never imported; the
        # ones a tool imports are compiled when it first runs): less CPU beside the tests.
        local compile=()
        case "$kind" in interop | lmeval) compile=(--no-compile) ;; esac
        "$PY" -m pip install --disable-pip-version-check --quiet "${compile[@]}" -r "$EVALSITE_ROOT/$req" ||
            die "pip install -r $req failed (see above)"
        echo "$hash" >"$stamp"
    fi
    _setup_unlock
}

# setup_node NAME: the npm packages of tests/interop/NAME (package.json and its package-lock.json,
# versions pinned) installed with `npm ci` into .local/node-NAME; sets NODE_DIR. npm runs only when
# the lock file changed since the last install. Optional dependencies are left out (promptfoo's
# pull in 1.9 GB of providers' SDKs; the ones needed are named in package.json).
setup_node() {
    local name="$1" src dir hash stamp
    src="$EVALSITE_ROOT/tests/interop/$name"
    dir="$EVALSITE_ROOT/.local/node-$name"
    NODE_DIR="$dir"
    ensure_system_packages npm:npm
    _setup_lock "node-$name"
    hash="$(_requirements_hash "tests/interop/$name/package.json" "tests/interop/$name/package-lock.json")"
    stamp="$dir/.evalsite-node.sha256"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$hash" ]; then
        log "installing npm packages of tests/interop/$name into ${dir#"$EVALSITE_ROOT"/} (the first time takes a minute or two)"
        rm -rf "$dir"
        mkdir -p "$dir"
        cp "$src/package.json" "$src/package-lock.json" "$dir/"
        (cd "$dir" && npm ci --omit=optional --no-audit --no-fund --loglevel=error) ||
            die "npm ci in ${dir#"$EVALSITE_ROOT"/} failed (see above)"
        echo "$hash" >"$stamp"
    fi
    _setup_unlock
}

# ---- System packages ------------------------------------------------------------------------
# ensure_system_packages CHECK:PACKAGE ...  CHECK is a command name or a path glob.
# Missing ones are installed with apt-get when we are root; otherwise print the one command.
_APT_UPDATED=0
ensure_system_packages() {
    local spec check package missing=()
    for spec in "$@"; do
        check="${spec%%:*}"
        package="${spec#*:}"
        if [[ "$check" == /* ]]; then
            compgen -G "$check" >/dev/null && continue
        else
            command -v "$check" >/dev/null 2>&1 && continue
        fi
        missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        die "missing system packages: ${missing[*]}. Install them with:
    sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}"
    fi
    log "installing system packages with apt-get: ${missing[*]}"
    # Keep apt from starting system-wide redis/postgres services we do not use (and that
    # would outlive us): a policy-rc.d that denies every start, only while we install.
    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
    fi
    local status=0
    if [ "$_APT_UPDATED" -eq 0 ]; then
        apt-get update -qq || status=$?
        _APT_UPDATED=1
    fi
    [ $status -eq 0 ] && { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" || status=$?; }
    [ $made_policy -eq 1 ] && rm -f "$policy"
    [ $status -eq 0 ] || die "apt-get install ${missing[*]} failed (exit $status)"
}

# ---- Environment ----------------------------------------------------------------------------
# Export NAME=value lines of .env (or $EVALSITE_ENV_FILE; empty means none). Variables already
# in the environment win; an empty value means unset. Parsed by Python so JSON values need no
# shell quoting.
load_dotenv() {
    local file="${EVALSITE_ENV_FILE-$EVALSITE_ROOT/.env}" exports
    [ -n "$file" ] && [ -f "$file" ] || return 0
    exports="$("$PY" - "$file" <<'PYEOF'
import os
import shlex
import sys

path = sys.argv[1]
with open(path, encoding="utf-8") as handle:
    for number, raw in enumerate(handle, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").lstrip()
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key.isidentifier():
            sys.exit(f"{path}:{number}: expected NAME=value, got {raw.strip()!r}")
        if len(value) >= 2 and value[0] in "'\"" and value[-1] == value[0]:
            value = value[1:-1]
        elif value.startswith("#"):
            value = ""
        else:
            value = value.split(" #", 1)[0].rstrip()
        # NAME= with nothing after it means unset, as when the line is commented out.
        if value and key not in os.environ:
            print(f"export {key}={shlex.quote(value)}")
PYEOF
)" || die "could not read $file"
    eval "$exports"
    [ -n "$exports" ] && log "read settings from $file"
    return 0
}

# ---- Ports and processes --------------------------------------------------------------------
free_port() {
    "${PY:-python3}" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_for_port PORT SECONDS [PID]: until something listens on 127.0.0.1:PORT; fails early
# when PID (the process that should listen) has died.
wait_for_port() {
    local port="$1" seconds="$2" pid="${3:-}" deadline=$((SECONDS + $2))
    until port_open "$port"; do
        [ -n "$pid" ] && ! starting_or_alive "$pid" && return 1
        [ $SECONDS -ge $deadline ] && return 1
        sleep 0.1
    done
}

# start_redis DIR [PORT] [redis-server options...]: a private redis-server on 127.0.0.1, its log
# in DIR/redis.log; sets REDIS_PORT and LAST_PID. Without PORT it takes a free port, and when
# redis-server exits at start (another program took that port in between), it tries another, up
# to 5 times. It never returns without a Redis: it dies saying why (the end of the log).
start_redis() {
    local dir="$1" fixed="${2:-}" attempt port=""
    shift 2
    mkdir -p "$dir"
    for attempt in 1 2 3 4 5; do
        port="${fixed:-$(free_port)}"
        if port_open "$port"; then
            [ -n "$fixed" ] && die "Redis port $port is in use: set EVALSITE_REDIS_PORT to a free port"
            continue
        fi
        start_bg redis-server TERM --log "$dir/redis.log" redis-server --bind 127.0.0.1 \
            --port "$port" --protected-mode yes --dir "$dir" "$@"
        if wait_for_port "$port" 30 "$LAST_PID"; then
            REDIS_PORT="$port"
            return 0
        fi
        group_alive "$LAST_PID" && kill -KILL -- "-$LAST_PID" 2>/dev/null
        [ -n "$fixed" ] && break
        log "redis-server did not start on port $port (attempt $attempt of 5): $(tail -1 "$dir/redis.log")"
    done
    die "redis-server did not start on port $port: $(tail -5 "$dir/redis.log" 2>/dev/null)"
}

EVALSITE_PIDS=()
declare -A EVALSITE_NAMES=()
declare -A EVALSITE_STOP_SIGNALS=()

# start_bg NAME SIGNAL [--log FILE] COMMAND...: start COMMAND in its own session (so its process
# group id is its pid and a terminal's Ctrl-C reaches only us); cleanup stops the group with
# SIGNAL. With --log, its output goes to FILE instead of ours.
start_bg() {
    local name="$1" signal="$2" log_file=/dev/stdout
    shift 2
    if [ "$1" = --log ]; then
        log_file="$2"
        shift 2
    fi
    if [ "$log_file" = /dev/stdout ]; then
        setsid "$@" &
    else
        setsid "$@" >"$log_file" 2>&1 &
    fi
    local pid=$!
    EVALSITE_PIDS+=("$pid")
    EVALSITE_NAMES[$pid]="$name"
    EVALSITE_STOP_SIGNALS[$pid]="$signal"
    LAST_PID=$pid
}

# True while any process of group $1 is alive (zombies do not count: nobody may reap them).
group_alive() {
    ps -eo pgid=,stat= | awk -v g="$1" '$1 == g && $2 !~ /^Z/ { found = 1 } END { exit !found }'
}

# True while process $1 lives or its group does. Right after `setsid cmd &` the child may not
# have made its own group yet (a loaded machine schedules it late): its group is then empty
# though it is starting, and "did not start" would be said of a server that was about to.
starting_or_alive() {
    group_alive "$1" && return 0
    local state
    state="$(ps -o stat= -p "$1" 2>/dev/null)" && [[ "$state" != Z* ]]
}

# Hooks run by cleanup before stopping processes (e.g. removing temp dirs comes after).
EVALSITE_AFTER_STOP=()

stop_all() {
    local i pid deadline
    # Newest first: the web server and worker stop before the Redis they talk to.
    for ((i = ${#EVALSITE_PIDS[@]} - 1; i >= 0; i--)); do
        pid="${EVALSITE_PIDS[$i]}"
        group_alive "$pid" || continue
        kill "-${EVALSITE_STOP_SIGNALS[$pid]}" -- "-$pid" 2>/dev/null || true
        deadline=$((SECONDS + ${EVALSITE_STOP_TIMEOUT:-15}))
        while group_alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
        if group_alive "$pid"; then
            log "${EVALSITE_NAMES[$pid]} did not stop in time: killing it"
            kill -KILL -- "-$pid" 2>/dev/null || true
        fi
    done
    for pid in "${EVALSITE_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    EVALSITE_PIDS=()
}

_cleanup() {
    local status=$?
    trap - EXIT INT TERM HUP
    trap '' INT TERM HUP  # a second Ctrl-C must not cut the cleanup short
    stop_all
    local hook
    for hook in "${EVALSITE_AFTER_STOP[@]}"; do eval "$hook" || true; done
    exit "$status"
}
trap _cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
