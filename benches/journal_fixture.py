#!/usr/bin/env python3
"""Writes a file ledger (`migration-ledger/v2` journal) holding N applied
migrations `m-00001`... exactly as the runner appends them: per migration an
attempt-mark record, then the entry's record, each a checksummed line.

    python3 benches/journal_fixture.py PATH N compact   # what the runner writes now
    python3 benches/journal_fixture.py PATH N full      # the old full form

`compact` reproduces `migrate run`'s file byte for byte in size (compact
entries naming the shared records `c.1`/`c.2`, fingerprinted tokens); `full`
is what the runner wrote before the compact form: full-form entries and
attempt marks carrying the whole token (the 44 MB fixture of
benches/README.md at 10^5). Made for the memory measurements there
("Plan memory at 10^5"), where applying 10^5 scripts takes minutes.
"""
import json
import sys

path, n, form = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if form not in ("compact", "full"):
    sys.exit("form must be compact or full")

# CRC-32C (Castagnoli), as the journal frames each record.
POLY = 0x82F63B78
TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ POLY if c & 1 else c >> 1
    TABLE.append(c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def compact(value):
    return json.dumps(value, separators=(",", ":"))


# The digest of the scripts peers.sh writes, and of an empty lib/.
SHA = "b8e4fddccbadcafcf5cb86717628d84967bf5293982bcbb837aef9799389a922"
LIB = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

with open(path, "wb") as out:
    out.write(b"migration-ledger/v2\n")

    def record(op, rev, data):
        line = compact({"op": op, "rev": rev, "data": dict(sorted(data.items()))}).encode()
        out.write(b"%08x " % crc32c(line) + line + b"\n")

    # The first write converts the empty v1 file (revision 1) into a
    # snapshot at revision 2.
    rev = 2
    for i in range(1, n + 1):
        slug = f"m-{i:05d}"
        shared = {}
        if form == "full":
            token = f"migrate-runner-host-0123456789abcdef/{slug}/1764600000{i:09d}/{i}"
            mark = {"count": 1, "token": token}
            entry = {"state": "ok", "at": "2026-12-01T14:50:00Z", "sha256": SHA,
                     "lib_sha256": LIB, "batch": "00001-v1", "attempts": 1}
        else:
            mark = {"count": 1, "token": f"{(i * 0x9E3779B97F4A7C15) % 2**64:016x}"}
            entry = {"s": "ok", "t": "2026-12-01T14:50:00Z", "h": SHA, "c": "2", "n": 1}
            if i == 1:
                shared = {"c.1": compact({"lib_sha256": LIB}),
                          "c.2": compact({"base": "1", "batch": "00001-v1"})}
        record("object" if i == 1 else "put", rev, {"a." + slug: compact(mark)})
        rev += 1
        record("put", rev, {**shared, "m." + slug: compact(entry)})
        rev += 1
