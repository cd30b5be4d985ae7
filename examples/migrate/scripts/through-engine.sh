#!/bin/sh
# through-engine.sh: run a platform's own tests of its numbered scripts through the engine.
#
# Usage: through-engine.sh --migrate BIN --tree TREE --out DIR [--stamp CMD] [--tier TIER]
#                          [--allow-interpreter PATH]... SLOT...
#
# For each SLOT (a numbered script's number, looked up in TREE's legacy-map, or SLOT=SLUG), writes
# an executable DIR/SLOT that stands where the platform's test runs the numbered script: it runs
# the converted content through `migrate run` on a private file ledger in which every other
# migration is recorded (seed-fresh, then `repair --rerun` of this one), so the test's fake
# cluster sees exactly the calls the engine lets the script make. Point the test at DIR/SLOT in
# place of the numbered file (ADOPTING.md, "Your own tests, through the engine").
#
# The numbered runner's "version stamp" is the engine's record: CMD (a shell command, given the
# slug as $1 and the slot as $2) runs only when the run exited 0 and the ledger recorded the slug `ok`, so a test
# asserting "no stamp after a failure" asserts "nothing recorded ok after a failure".
# The wrapper exits with `migrate run`'s status.
set -eu

# Single-quoted for the wrappers' sh.
quote() { printf '%s' "$1" | sed "s/'/'\\\\''/g; s/^/'/; s/\$/'/"; }

migrate='' tree='' out='' stamp='' tier=pre-apply allow=''
while [ $# -gt 0 ]; do
	case $1 in
	--migrate) migrate=$2; shift 2 ;;
	--tree) tree=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--stamp) stamp=$2; shift 2 ;;
	--tier) tier=$2; shift 2 ;;
	--allow-interpreter) allow="$allow --allow-interpreter $(quote "$2")"; shift 2 ;;
	--) shift; break ;;
	-*) echo "through-engine.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
if [ -z "$migrate" ] || [ -z "$tree" ] || [ -z "$out" ] || [ $# -eq 0 ]; then
	echo "usage: through-engine.sh --migrate BIN --tree TREE --out DIR [--stamp CMD] SLOT..." >&2
	exit 2
fi
[ -x "$migrate" ] || { echo "through-engine.sh: --migrate $migrate: not an executable" >&2; exit 2; }
[ -d "$tree/order.d" ] || { echo "through-engine.sh: $tree has no order.d/ (run migrate manifest first)" >&2; exit 2; }
mkdir -p "$out"


for arg in "$@"; do
	case $arg in
	*=*) slot=${arg%%=*} slug=${arg#*=} ;;
	*)
		slot=$arg
		slug=$(awk -v n="$slot" '$1 == n { print $2; exit }' "$tree/legacy-map")
		[ -n "$slug" ] || { echo "through-engine.sh: slot $slot: not in $tree/legacy-map" >&2; exit 2; }
		;;
	esac
	[ -f "$tree/$tier/$slug" ] || { echo "through-engine.sh: slot $slot: no $tree/$tier/$slug" >&2; exit 2; }
	cat >"$out/$slot" <<WRAPPER
#!/bin/sh
# Slot $slot, run as the engine runs $tier/$slug (written by through-engine.sh).
set -u
migrate=$(quote "$migrate") tree=$(quote "$tree") slug=$(quote "$slug")
ledger=\$(mktemp -d) || exit 99
trap 'rm -rf "\$ledger"' EXIT
if ! { "\$migrate" seed-fresh --ledger "file:\$ledger/l.json" "\$tree" &&
	"\$migrate" repair --ledger "file:\$ledger/l.json" --by through-engine --reason "the platform's test" \\
		--rerun "\$tree" "\$slug"; } >"\$ledger/set-up" 2>&1; then
	echo "through-engine: setting up the ledger failed:" >&2
	cat "\$ledger/set-up" >&2
	exit 99
fi
rc=0
"\$migrate" run --ledger "file:\$ledger/l.json" --tier $(quote "$tier")$allow "\$tree" || rc=\$?
# The entry's own state is the document's first "state" (its repairs come after it).
state=\$("\$migrate" status --ledger "file:\$ledger/l.json" -o json "\$slug" |
	grep -o '"state": *"[a-z-]*"' | head -n 1 | sed 's/.*"\\([a-z-]*\\)"\$/\\1/')
echo "through-engine: migrate run exited \$rc; \$slug recorded \${state:-nothing}" >&2
if [ "\$rc" = 0 ] && [ "\$state" = ok ]; then
	set -- "\$slug" $(quote "$slot")
	$stamp
fi
exit "\$rc"
WRAPPER
	chmod +x "$out/$slot"
done
