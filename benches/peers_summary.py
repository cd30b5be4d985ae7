#!/usr/bin/env python3
"""Prints (and with --write-readme, puts into benches/README.md) the table of
`benches/peers.sh`'s last run: hyperfine medians, nothing else computed but
the ratios shown.

Usage: python3 benches/peers_summary.py RESULTS_DIR [--write-readme README]
"""

import glob
import json
import os
import re
import statistics
import sys

BEGIN = "<!-- peers.sh:begin -->"
END = "<!-- peers.sh:end -->"

JOBS = [
    ("apply", "apply N trivial migrations (fresh store each run)"),
    ("noop", "run with nothing to do"),
    ("decide", "decide what is pending, read only"),
]
TOOLS = [
    ("migrate", "`migrate` (this branch)"),
    ("before", "`migrate` before"),
    ("alembic", "alembic"),
    ("yoyo", "yoyo"),
    ("sqlx", "sqlx-cli"),
    ("floor-read", "floor: read the tree"),
    ("floor-spawn", "floor: spawn N scripts"),
    ("floor-fsync", "floor: N durable appends"),
    ("floor-std", "floor: both, from Rust"),
]


def fmt(seconds):
    if seconds is None:
        return "–"
    if seconds >= 10:
        return f"{seconds:.1f} s"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    ms = seconds * 1000
    return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1f} ms"


def load(results):
    times = {}
    for path in glob.glob(os.path.join(results, "*.json")):
        name = os.path.basename(path)[:-5]
        name = re.sub(r"\.r\d+$", "", name)  # one file per round
        job, n, tool = name.split("-", 2)
        try:
            with open(path) as f:
                r = json.load(f)["results"][0]
        except (ValueError, KeyError, IndexError):
            continue  # a run still in progress, or one that failed
        times.setdefault((job, int(n), tool), []).extend(r["times"])
    medians = {k: statistics.median(v) for k, v in times.items()}
    runs = {k: len(v) for k, v in times.items()}
    meta = {}
    with open(os.path.join(results, "meta.env")) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("=")
            meta[k] = v
    commands = {}
    for path in glob.glob(os.path.join(results, "commands-*.tsv")):
        job = os.path.basename(path)[len("commands-"):-4]
        with open(path) as f:
            for line in f:
                tool, _, cmd = line.rstrip("\n").partition("\t")
                root = meta.get("root", "")
                if root:
                    cmd = re.sub(re.escape(root) + r"/target/peers-work/\d+", "$W", cmd)
                    cmd = cmd.replace(root + "/", "")
                cmd = re.sub(r"(apply-floor sync \$W/floor\.appends) \d+$", r"\1 N", cmd)
                commands.setdefault((job, tool), cmd)
    return medians, runs, meta, commands


def table(medians, runs, meta, commands):
    sizes = sorted({n for (_, n, _) in medians})
    present = [t for t in TOOLS if any(k[2] == t[0] for k in medians)]
    out = []
    out.append(
        f"One run of `benches/peers.sh` on {meta.get('date')}: `nproc` = {meta.get('nproc')} "
        f"({meta.get('cpu')}), kernel {meta.get('kernel')}, {meta.get('fs')}; load average "
        f"{meta.get('load_start')} at the start and {meta.get('load_end', '?')} at the end "
        "(the machine is shared with other agents' builds and tests). Whole processes; each "
        f"cell is the median of {meta.get('rounds')} rounds that take the tools in turn, "
        f"{meta.get('runs')} hyperfine runs per round after a warm-up for the quick jobs, "
        f"{meta.get('apply_runs')} per round for apply (a fresh store before each; "
        f"{meta.get('rounds_large')} rounds for apply at 10⁴)."
    )
    out.append("")
    out.append(
        f"Versions: `migrate` {meta.get('migrate')} (rustc {meta.get('rustc')}, release)"
        + (f", `migrate` before = {meta.get('before')}" if meta.get("before") else "")
        + f"; alembic {meta.get('alembic')} (SQLAlchemy {meta.get('sqlalchemy')}), "
        f"yoyo-migrations {meta.get('yoyo')}, Python {meta.get('python')}; sqlx-cli "
        f"{meta.get('sqlx')} (bundled SQLite); hyperfine {meta.get('hyperfine')}."
    )
    out.append("")
    out.append("| job | N | " + " | ".join(label for _, label in present) + " |")
    out.append("|---|---|" + "---|" * len(present))
    for job, label in JOBS:
        for n in sizes:
            cells = [fmt(medians.get((job, n, tool))) for tool, _ in present]
            if all(c == "–" for c in cells):
                continue
            out.append(f"| {label} | {n:,} | " + " | ".join(cells) + " |")
    out.append("")

    def ratio(a, b):
        return None if a is None or b is None else a / b

    out.append("Against the goals (issue 17), from the medians above:")
    out.append("")
    m = lambda job, n, tool: medians.get((job, n, tool))  # noqa: E731
    r = ratio(m("apply", 1000, "migrate"), m("apply", 1000, "sqlx"))
    if r is not None:
        out.append(f"- apply 10³: `migrate` / sqlx-cli = **{r:.2f}** (goal: below 1).")
    r = ratio(m("apply", 10000, "migrate"), m("apply", 1000, "migrate"))
    if r is not None:
        out.append(f"- apply 10⁴ / apply 10³ for `migrate` = **{r:.1f}** (goal: at most 11).")
    for job, what in (("noop", "no-op run"), ("decide", "read-only decide")):
        for n in (1000, 10000):
            r = ratio(m(job, n, "migrate"), m(job, n, "sqlx"))
            if r is not None:
                out.append(f"- {what} at {n:,}: `migrate` / sqlx-cli = **{r:.2f}** (goal: at most 1).")
    per = lambda t, n: "–" if t is None else f"{t / n * 1000:.2f} ms"  # noqa: E731
    for n in sizes:
        a = m("apply", n, "migrate")
        if a is None:
            continue
        both = m("apply", n, "floor-std")
        over = "" if both is None else f"; `migrate` above the Rust floor: {(a - both) / n * 1000:.2f} ms"
        out.append(
            f"- apply {n:,}: `migrate` {per(a, n)} per migration; floors: spawning from `sh` "
            f"{per(m('apply', n, 'floor-spawn'), n)}, one durable append "
            f"{per(m('apply', n, 'floor-fsync'), n)}, both from Rust {per(both, n)}{over}."
        )
    exact = ["Exact commands (`$W` = `target/peers-work/N`):", "", "| job | tool | command |", "|---|---|---|"]
    for job, _ in JOBS:
        for tool, label in present:
            cmd = commands.get((job, tool))
            if cmd:
                exact.append(f"| {job} | {label} | `{cmd}` |")
    # The README keeps the figures; the exact commands are printed with them
    # (and are in peers.sh), not kept in the README.
    return "\n".join(out) + "\n", "\n".join(exact) + "\n"


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    results = args[0]
    text, exact = table(*load(results))
    print(text)
    print(exact)
    if "--write-readme" in args:
        readme = args[args.index("--write-readme") + 1]
        with open(readme) as f:
            body = f.read()
        block = f"{BEGIN}\n{text}{END}"
        if BEGIN in body and END in body:
            body = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, body, flags=re.S)
        else:
            body = body.rstrip("\n") + "\n\n## Side by side with the peers (`benches/peers.sh`)\n\n" + block + "\n"
        with open(readme, "w") as f:
            f.write(body)
        print(f"wrote {readme}", file=sys.stderr)


if __name__ == "__main__":
    main()
