#!/usr/bin/env bash
# Whole-process timings of `migrate` (file ledger) beside its peers on
# SQLite -- alembic, yoyo-migrations, sqlx-cli -- and beside the floors (the
# cost of reading the scripts, of spawning them, of durable appends), all in
# one run, medians by hyperfine.
#
#   benches/peers.sh                     # install what is missing, measure, print the table
#   benches/peers.sh --write-readme      # ... and replace the table in benches/README.md
#   benches/peers.sh --summarize-only --write-readme   # table from the last run's results
#
# The machine is shared, so its load moves while a run goes on: every job
# is timed in ROUNDS rounds (default 3) that take each tool in turn, and the
# median is over all the rounds' runs, so a busy minute hits every tool
# alike instead of whichever was being timed then.
#
# The apply floors: a `sh` loop spawning the scripts; N durable appends
# (256-byte `pwrite` into preallocated space, then `fdatasync`); and both
# from a Rust program, one append before each script started as the runner
# starts it (benches/src/bin/apply-floor.rs).
#
# Environment: SIZES (default "100 1000 10000"), ROUNDS, RUNS (hyperfine
# runs per round for the quick jobs, default 4), APPLY_RUNS (per round for
# "apply N", default 1), MIGRATE_BIN (a prebuilt
# binary instead of `cargo build --release`, with its `migrate-shim` beside it), APPLY_FLOOR_BIN
# (likewise for benches' `apply-floor`), BEFORE_BIN (optional: another
# `migrate` binary timed beside it, e.g. the main branch before a change;
# it runs only below 10^4), ROUNDS_LARGE (rounds of "apply N" at 10^4 and
# above, default 2), JOBS (default "apply decide noop";
# "apply" first leaves every store fully applied for the other two).
#
# Everything installed or generated lives under target/ (peers in
# target/peers, trees and databases in target/peers-work); nothing is
# installed into the project. Peers come from their registries: alembic and
# yoyo-migrations from PyPI into a venv, sqlx-cli with `cargo install`,
# hyperfine from Debian (apt) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PEERS="$ROOT/target/peers"
WORK="$ROOT/target/peers-work"
RESULTS="$WORK/results"
SIZES=${SIZES:-"100 1000 10000"}
ROUNDS=${ROUNDS:-3}
ROUNDS_LARGE=${ROUNDS_LARGE:-2}
RUNS=${RUNS:-4}
APPLY_RUNS=${APPLY_RUNS:-1}
JOBS=${JOBS:-"apply decide noop"}
ALEMBIC_VERSION=1.20.1
YOYO_VERSION=9.0.0
SQLX_VERSION=0.9.0

write_readme=0
summarize_only=0
for arg in "$@"; do
    case "$arg" in
        --write-readme) write_readme=1 ;;
        --summarize-only) summarize_only=1 ;;
        -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
        *) echo "unknown argument: $arg" >&2; exit 2 ;;
    esac
done

summarize() {
    local args=("$RESULTS")
    [ "$write_readme" = 1 ] && args+=(--write-readme "$ROOT/benches/README.md")
    python3 "$ROOT/benches/peers_summary.py" "${args[@]}"
}

if [ "$summarize_only" = 1 ]; then
    summarize
    exit 0
fi

# ---- install ----------------------------------------------------------------
install_peers() {
    mkdir -p "$PEERS"
    if ! command -v hyperfine >/dev/null; then
        echo "== installing hyperfine (Debian package)"
        apt-get install -y hyperfine >/dev/null 2>&1 || {
            apt-get update >/dev/null && apt-get install -y hyperfine >/dev/null
        }
    fi
    if [ ! -x "$PEERS/venv/bin/alembic" ] || [ ! -x "$PEERS/venv/bin/yoyo" ]; then
        echo "== installing alembic $ALEMBIC_VERSION and yoyo-migrations $YOYO_VERSION (PyPI) into $PEERS/venv"
        python3 -m venv "$PEERS/venv"
        "$PEERS/venv/bin/pip" install -q "alembic==$ALEMBIC_VERSION" "yoyo-migrations==$YOYO_VERSION"
    fi
    if [ ! -x "$PEERS/bin/sqlx" ]; then
        echo "== installing sqlx-cli $SQLX_VERSION (crates.io; about 25 minutes on 2 busy cores)"
        cargo install --quiet --locked --root "$PEERS" sqlx-cli --version "$SQLX_VERSION" \
            --no-default-features --features sqlite
    fi
}

install_peers
if [ -z "${MIGRATE_BIN:-}" ]; then
    echo "== building migrate (release)"
    # Both binaries: the runner refuses to run scripts without its
    # `migrate-shim` beside it.
    cargo build --quiet --release -p migrate --bins
    MIGRATE_BIN="$ROOT/target/release/migrate"
fi
if [ -z "${APPLY_FLOOR_BIN:-}" ]; then
    echo "== building apply-floor (release)"
    cargo build --quiet --release -p benches --bin apply-floor
    APPLY_FLOOR_BIN="$ROOT/target/release/apply-floor"
fi
ALEMBIC="$PEERS/venv/bin/alembic"
YOYO="$PEERS/venv/bin/yoyo"
SQLX="$PEERS/bin/sqlx"
export MIGRATE_LOG=error

# ---- trees --------------------------------------------------------------------
# Every tool gets N migrations that do nothing: for migrate a `/bin/sh`
# script with a valid header that exits 0, for the peers an empty upgrade
# (alembic), `SELECT 1` (yoyo, sqlx). Each records its migrations in its own
# store: the file ledger, or a SQLite database.
make_trees() {
    local n=$1 dir="$WORK/$1"
    [ -f "$dir/.complete" ] && return 0
    rm -rf "$dir"
    mkdir -p "$dir/migrate/pre-apply" "$dir/migrate/background" "$dir/migrate/order.d" \
             "$dir/alembic/versions" "$dir/yoyo" "$dir/sqlx"
    python3 - "$dir" "$n" <<'EOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
slugs = [f"m-{i:05d}" for i in range(1, n + 1)]
for s in slugs:
    p = f"{d}/migrate/pre-apply/{s}"
    with open(p, "w") as f:
        f.write("#!/bin/sh\n# cozystack-migration: tier=pre-apply\n"
                "# cozystack-migration: on-error=abort\nset -eu\nexit 0\n")
    os.chmod(p, 0o755)
with open(f"{d}/migrate/order.d/00001-v1", "w") as f:
    f.write("".join(s + "\n" for s in slugs))
with open(f"{d}/alembic/alembic.ini", "w") as f:
    f.write("[alembic]\nscript_location = %(here)s\n"
            "sqlalchemy.url = sqlite:///%(here)s/alembic.db\n")
with open(f"{d}/alembic/env.py", "w") as f:
    f.write("from alembic import context\nfrom sqlalchemy import create_engine\n"
            "engine = create_engine(context.config.get_main_option('sqlalchemy.url'))\n"
            "with engine.connect() as connection:\n"
            "    context.configure(connection=connection, target_metadata=None)\n"
            "    with context.begin_transaction():\n"
            "        context.run_migrations()\n")
for i in range(1, n + 1):
    down = f'"r{i-1:05d}"' if i > 1 else "None"
    with open(f"{d}/alembic/versions/r{i:05d}.py", "w") as f:
        f.write(f'revision = "r{i:05d}"\ndown_revision = {down}\n'
                "branch_labels = None\ndepends_on = None\n\n"
                "def upgrade():\n    pass\n\ndef downgrade():\n    pass\n")
    with open(f"{d}/yoyo/{i:05d}_m.sql", "w") as f:
        f.write("SELECT 1;\n")
    with open(f"{d}/sqlx/{i}_m.sql", "w") as f:
        f.write("SELECT 1;\n")
EOF
    touch "$dir/.complete"
}

# The stores before anything is applied: an existing, empty file ledger (an
# upgrade, not a fresh install, which would only seed), no databases.
EMPTY_LEDGER='{"format":"migration-ledger/v1","ledger":{"revision":1,"data":{}},"lock":null,"lock_generation":0}'

reset_cmd() { # tool dir -> a shell command that resets the tool's store
    local tool=$1 d=$2
    case "$tool" in
        migrate|before) echo "rm -f $d/$tool.ledger $d/$tool.ledger.lock; printf '%s\n' '$EMPTY_LEDGER' > $d/$tool.ledger" ;;
        alembic) echo "rm -f $d/alembic/alembic.db" ;;
        yoyo) echo "rm -f $d/yoyo.db" ;;
        sqlx) echo "rm -f $d/sqlx.db $d/sqlx.db-journal $d/sqlx.db-wal $d/sqlx.db-shm" ;;
        floor-*) echo "rm -f $d/floor.appends" ;;
    esac
}

cmd_for() { # job tool dir -> the timed command
    local job=$1 tool=$2 d=$3 bin
    case "$tool" in
        migrate) bin=$MIGRATE_BIN ;;
        before) bin=${BEFORE_BIN:-} ;;
    esac
    case "$job/$tool" in
        decide/migrate|decide/before) echo "$bin plan $d/migrate --ledger file:$d/$tool.ledger --tier pre-apply" ;;
        noop/migrate|noop/before|apply/migrate|apply/before) echo "$bin run $d/migrate --ledger file:$d/$tool.ledger --tier pre-apply" ;;
        decide/alembic) echo "$ALEMBIC -c $d/alembic/alembic.ini current" ;;
        noop/alembic|apply/alembic) echo "$ALEMBIC -c $d/alembic/alembic.ini upgrade head" ;;
        decide/yoyo) echo "$YOYO list --batch --no-config-file --database sqlite:///$d/yoyo.db $d/yoyo" ;;
        noop/yoyo|apply/yoyo) echo "$YOYO apply --batch --no-config-file --database sqlite:///$d/yoyo.db $d/yoyo" ;;
        decide/sqlx) echo "$SQLX migrate info --source $d/sqlx --database-url sqlite:$d/sqlx.db" ;;
        noop/sqlx|apply/sqlx) echo "$SQLX migrate run --source $d/sqlx --database-url sqlite:$d/sqlx.db?mode=rwc" ;;
        # Floors: what any tool doing the job must at least pay.
        decide/floor-read) echo "cat $d/migrate/order.d/00001-v1 $d/migrate/pre-apply/*" ;;
        apply/floor-spawn) echo "sh -c 'for f in $d/migrate/pre-apply/*; do /bin/sh -e \"\$f\" || exit 1; done'" ;;
        apply/floor-fsync) echo "$APPLY_FLOOR_BIN sync $d/floor.appends ${d##*/}" ;;
        apply/floor-std) echo "$APPLY_FLOOR_BIN spawn-sync $d/migrate/pre-apply $d/floor.appends" ;;
        *) return 1 ;;
    esac
}

tools_for() { # job n
    local job=$1 n=$2 tools="migrate"
    # The main branch before the journal fills its 1 MiB budget near 3,000.
    if [ -n "${BEFORE_BIN:-}" ] && [ "$n" -lt 10000 ]; then
        tools="$tools before"
    fi
    tools="$tools alembic yoyo sqlx"
    case "$job" in
        decide) tools="$tools floor-read" ;;
        apply) tools="$tools floor-spawn floor-fsync floor-std" ;;
    esac
    echo "$tools"
}

# ---- measure -------------------------------------------------------------------
mkdir -p "$RESULTS"
rm -f "$RESULTS"/*.json "$RESULTS"/*.err "$RESULTS"/*.tsv "$RESULTS"/meta.env
{
    echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "root=$ROOT"
    echo "nproc=$(nproc)"
    echo "load_start=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo "kernel=$(uname -r)"
    echo "fs=$(df -T "$WORK" | awk 'NR==2 {print $2}')"
    echo "migrate=$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo '+dirty')"
    echo "before=${BEFORE_LABEL:-${BEFORE_BIN:+$BEFORE_BIN}}"
    echo "alembic=$("$PEERS/venv/bin/pip" show alembic | awk '/^Version/ {print $2}')"
    echo "sqlalchemy=$("$PEERS/venv/bin/pip" show sqlalchemy | awk '/^Version/ {print $2}')"
    echo "yoyo=$("$PEERS/venv/bin/pip" show yoyo-migrations | awk '/^Version/ {print $2}')"
    echo "python=$("$PEERS/venv/bin/python" -c 'import sys, sqlite3; print(sys.version.split()[0], "sqlite", sqlite3.sqlite_version)')"
    echo "sqlx=$("$SQLX" --version | awk '{print $2}')"
    echo "hyperfine=$(hyperfine --version | awk '{print $2}')"
    echo "rustc=$(rustc --version | awk '{print $2}')"
    echo "sizes=$SIZES"
    echo "rounds=$ROUNDS"
    echo "rounds_large=$ROUNDS_LARGE"
    echo "runs=$RUNS"
    echo "apply_runs=$APPLY_RUNS"
} > "$RESULTS/meta.env"

time_one() { # job tool n round
    local job=$1 tool=$2 n=$3 round=$4 d="$WORK/$3" cmd runs prepare=() setup
    local out="$RESULTS/$job-$n-$tool.r$round"
    cmd=$(cmd_for "$job" "$tool" "$d")
    runs=$RUNS
    if [ "$job" = apply ]; then
        runs=$APPLY_RUNS
        prepare=(--prepare "$(reset_cmd "$tool" "$d")")
    else
        case "$tool" in
            floor-*) ;;
            *)  # The steady state: everything applied (by the apply job,
                # or here, untimed).
                if [ ! -f "$d/$tool.applied" ]; then
                    setup=$(reset_cmd "$tool" "$d")
                    sh -c "$setup"
                    sh -c "$(cmd_for apply "$tool" "$d")" >/dev/null 2>&1 || {
                        echo "   $tool: applying $n failed; skipping $job" >&2
                        return 0
                    }
                    touch "$d/$tool.applied"
                fi ;;
        esac
    fi
    echo "-- $job n=$n round $round $tool: $cmd"
    if [ "$job" = apply ]; then rm -f "$d/$tool.applied"; fi
    hyperfine --style basic --warmup "$([ "$job" = apply ] && echo 0 || echo 1)" --runs "$runs" \
        "${prepare[@]}" --command-name "$tool" --export-json "$out.json" \
        "$cmd" >/dev/null 2>"$out.err" || {
            echo "   $tool failed (see $out.err)" >&2
            rm -f "$out.json"
            return 0
        }
    if [ "$job" = apply ]; then touch "$d/$tool.applied"; fi
    if [ "$round" = 1 ]; then
        printf '%s\t%s\n' "$tool" "$cmd" >> "$RESULTS/commands-$job.tsv"
    fi
}

for n in $SIZES; do
    echo "== N = $n: generating trees"
    make_trees "$n"
    for job in $JOBS; do
        rounds=$ROUNDS
        if [ "$job" = apply ] && [ "$n" -ge 10000 ]; then rounds=$ROUNDS_LARGE; fi
        for round in $(seq 1 "$rounds"); do
            for tool in $(tools_for "$job" "$n"); do
                time_one "$job" "$tool" "$n" "$round"
            done
        done
    done
done
echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$RESULTS/meta.env"
summarize
