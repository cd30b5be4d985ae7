#!/usr/bin/env python3
"""Prints the README's timing tables from criterion's saved estimates.

Usage: python3 benches/summarize.py [CRITERION_DIR]
(default: $CARGO_TARGET_DIR/criterion, else target/criterion).

Reads every `<group>/<bench>/new/estimates.json` of the last
`cargo bench -p benches` run and prints medians (criterion's median of the
per-iteration sample means) and the ratios the README reports. Nothing is
computed that is not in those files.
"""

import json
import os
import sys


def load(root):
    results = {}
    for dirpath, _dirs, files in os.walk(root):
        if os.path.basename(dirpath) != "new" or "estimates.json" not in files:
            continue
        with open(os.path.join(dirpath, "benchmark.json")) as f:
            bench = json.load(f)
        with open(os.path.join(dirpath, "estimates.json")) as f:
            est = json.load(f)
        key = (bench["group_id"], bench.get("function_id"), bench.get("value_str"))
        elements = (bench.get("throughput") or {}).get("Elements")
        results[key] = est["median"]["point_estimate"]  # nanoseconds
        results[key + ("elements",)] = elements
    return results


def fmt(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}" if ns / scale < 100 else f"{ns / scale:.0f} {unit}"
    return f"{ns:.0f} ns"


def main():
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(target, "criterion")
    r = load(root)

    print("### Plan vs. the parsing floor (K = 10 pending)\n")
    print("| N recorded | plan | parse (floor) | plan/parse | plan per migration | plan growth vs. N/10 |")
    print("| --- | --- | --- | --- | --- | --- |")
    prev = None
    for n in (100, 1000, 10000, 100000):
        p = r.get(("plan_vs_parse", "plan", str(n)))
        q = r.get(("plan_vs_parse", "parse", str(n)))
        if p is None or q is None:
            continue
        growth = f"×{p / prev:.1f}" if prev else "–"
        print(f"| {n:,} | {fmt(p)} | {fmt(q)} | {p / q:.2f} | {p / (n + 10):.0f} ns | {growth} |")
        prev = p

    print("\n### Stable topological sort (one batch of N slugs, E edges)\n")
    print("| N | E = 0 | E = N | E = 4N | ns per (N + E) at E = 4N |")
    print("| --- | --- | --- | --- | --- |")
    for n in (100, 1000, 10000, 100000):
        cells = [r.get(("topo_sort", e, str(n))) for e in ("E=0", "E=N", "E=4N")]
        if None in cells:
            continue
        print(f"| {n:,} | " + " | ".join(fmt(c) for c in cells) + f" | {cells[2] / (5 * n):.0f} |")

    print("\n### Manifest generation, pure (T tags × N slugs)\n")
    print("| T | N | (tag, slug) entries | generate | ns per entry |")
    print("| --- | --- | --- | --- | --- |")
    for t, n in ((30, 100), (30, 1000), (30, 10000), (30, 100000), (10, 1000), (100, 1000), (300, 1000)):
        key = ("generate", f"T={t}", f"N={n}")
        g = r.get(key)
        if g is None:
            continue
        entries = r.get(key + ("elements",))
        print(f"| {t} | {n:,} | {entries:,} | {fmt(g)} | {g / entries:.0f} |")

    a = r.get(("git_300_tags", "adapter_history", None))
    f = r.get(("git_300_tags", "ls_tree_floor", None))
    if a and f:
        print("\n### Git adapter, 300 tags\n")
        print("| adapter `Repo::history` | 300 × `git ls-tree` (floor) | adapter/floor |")
        print("| --- | --- | --- |")
        print(f"| {fmt(a)} | {fmt(f)} | {a / f:.2f} |")

    print("\n### Ledger entry encode/decode\n")
    print("| entry | encode | decode |")
    print("| --- | --- | --- |")
    for name in ("ok", "failed_4KiB_tail"):
        e = r.get(("entry", "encode", name))
        d = r.get(("entry", "decode", name))
        if e and d:
            print(f"| {name} | {fmt(e)} | {fmt(d)} |")


if __name__ == "__main__":
    main()
