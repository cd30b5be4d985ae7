#!/bin/sh
# upgrade-paths.sh: run every upgrade path from each release tag of a converted tree through the
# engine, against a fake cluster.
#
# Usage: upgrade-paths.sh --migrate BIN --tree TREE --fake DIR [--release-targets FILE]
#                         [--chart NAME] [--one-per-target] [--count-prereleases]
#                         [--allow-interpreter LINE]... [--timeout SECONDS] [--keep DIR] [TAG...]
#
# TREE is a tree `migrate convert --release-targets` wrote, committed, with its order.d/ (`migrate
# manifest`): its legacy-releases lists every release tag read, `TAG target=N ...` when the
# numbered runner's target there is known. Convert writes that file only when a slot diverged;
# without one, --release-targets names the same `TAG TARGET` file convert was given. For each tag
# (or each TAG given; with --one-per-target the first tag of each distinct target only), a
# cluster installed at that tag is simulated: a private file ledger, adopted as that cluster would
# be (`migrate adopt --legacy-version N` with a one-revision `--helm-history` naming the tag's
# release, from which adoption learns which content of each diverged slot the cluster ran), then
# upgraded (`migrate run` of TREE on that ledger), with DIR first on PATH: DIR holds the fake
# cluster's commands (kubectl, helm, ... and any binary of the image the scripts call that this
# machine lacks).
#
# One line per path: the tag, its target, what adoption recorded (the ledger's status summary and
# how many diverged slots the history answered), how many migrations the run executed, and the
# outcome: `ok`, `failed SLUG (REASON) exit N`, or `refused (adopt|run) exit N: MESSAGE`. A tag
# without a target (its runner predates the version ConfigMap: a cluster there has nothing to
# adopt, and `run` refuses it until adopted) is reported as such and not counted as failed. Then a
# summary. Exit 0 when every path ran, 1 when one failed or was refused, 2 on bad usage.
#
# --chart NAME names the release's chart in the history (`NAME-VERSION`, VERSION being the tag
# without its leading `v`; default `platform`). --allow-interpreter is given to adopt and run, for
# trees whose scripts name the image's shell. --count-prereleases is given to adopt: a cluster
# installed at a pre-release then answers from its history too. --keep DIR keeps each path's ledger and logs in
# DIR/TAG (default: a temporary directory, removed).
set -eu

# Single-quoted for messages that show a command.
quote() { printf '%s' "$1" | sed "s/'/'\\\\''/g; s/^/'/; s/\$/'/"; }

usage() {
	echo "usage: upgrade-paths.sh --migrate BIN --tree TREE --fake DIR [--release-targets FILE] [--chart NAME] [--one-per-target] [--count-prereleases] [--allow-interpreter LINE]... [--timeout SECONDS] [--keep DIR] [TAG...]" >&2
	exit 2
}

migrate='' tree='' fake='' chart=platform per_target='' keep='' timeout='' targets_file='' prereleases=''
# The interpreters, one per line, for adopt and run alike.
interpreters=''
while [ $# -gt 0 ]; do
	case $1 in
	--migrate | --tree | --fake | --release-targets | --chart | --allow-interpreter | --timeout | --keep)
		[ $# -ge 2 ] || { echo "upgrade-paths.sh: $1 needs a value" >&2; usage; }
		case $1 in
		--migrate) migrate=$2 ;;
		--tree) tree=$2 ;;
		--fake) fake=$2 ;;
		--release-targets) targets_file=$2 ;;
		--chart) chart=$2 ;;
		--allow-interpreter) interpreters="$interpreters$2
" ;;
		--timeout) timeout=$2 ;;
		--keep) keep=$2 ;;
		esac
		shift 2
		;;
	--one-per-target) per_target=1; shift ;;
	--count-prereleases) prereleases=1; shift ;;
	--) shift; break ;;
	-*) echo "upgrade-paths.sh: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
if [ -z "$migrate" ] || [ -z "$tree" ] || [ -z "$fake" ]; then
	usage
fi
[ -x "$migrate" ] || { echo "upgrade-paths.sh: --migrate $(quote "$migrate"): not an executable" >&2; exit 2; }
[ -d "$tree/order.d" ] || { echo "upgrade-paths.sh: $tree has no order.d/ (run migrate manifest first)" >&2; exit 2; }
# The releases, `TAG [target=N] ...` a line: the tree's own list (which also says which content
# of a diverged slot each held), else, for a tree where no slot diverged, the targets file.
if [ -f "$tree/legacy-releases" ]; then
	releases_from=$tree/legacy-releases
	releases=$(grep -v -E '^[[:space:]]*(#|$)' "$tree/legacy-releases" || true)
elif [ -n "$targets_file" ]; then
	[ -f "$targets_file" ] || { echo "upgrade-paths.sh: --release-targets $(quote "$targets_file"): not a file" >&2; exit 2; }
	releases_from=$targets_file
	releases=$(awk '!/^[[:space:]]*(#|$)/ { print $1, "target=" $2 }' "$targets_file")
else
	echo "upgrade-paths.sh: $tree has no legacy-releases (no slot diverged): give --release-targets, the file convert was given" >&2
	exit 2
fi
# A list where no tag has a target would run nothing and pass.
printf '%s\n' "$releases" | grep -q ' target=[0-9]' ||
	{ echo "upgrade-paths.sh: no tag of $releases_from has a target (convert with --release-targets)" >&2; exit 2; }
[ -d "$fake" ] || { echo "upgrade-paths.sh: --fake $(quote "$fake"): not a directory" >&2; exit 2; }
case $timeout in
*[!0-9]*) echo "upgrade-paths.sh: --timeout $(quote "$timeout"): not a number of seconds" >&2; exit 2 ;;
esac
# PATH entries must be absolute: the scripts run with the tree root as working directory.
case $fake in /*) ;; *) fake=$(cd "$fake" && pwd) ;; esac

# The tags asked for, one per line; each must be a release of the tree (a typo would run nothing).
wanted=''
for tag in "$@"; do
	printf '%s\n' "$releases" | awk -v t="$tag" '$1 == t { found = 1 } END { exit !found }' ||
		{ echo "upgrade-paths.sh: tag $(quote "$tag") is not in $releases_from" >&2; exit 2; }
	wanted="$wanted$tag
"
done

if [ -n "$keep" ]; then
	mkdir -p "$keep"
	work=$keep
else
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
fi

# "$migrate" SUBCOMMAND ... (adopt or run) with every --allow-interpreter; `run` (the only one
# that runs scripts) with the fake cluster first on PATH and the --timeout, `adopt` with
# --count-prereleases.
engine() {
	engine_ifs=$IFS
	IFS='
'
	for engine_line in $interpreters; do
		set -- "$@" --allow-interpreter "$engine_line"
	done
	IFS=$engine_ifs
	if [ "$1" = run ]; then
		[ -z "$timeout" ] || set -- "$@" --timeout "$timeout"
		PATH="$fake:$PATH" "$migrate" "$@"
	else
		[ -z "$prereleases" ] || set -- "$@" --count-prereleases
		"$migrate" "$@"
	fi
}

# The first line of FILE that is not the run's own progress: what a refusal says.
first_problem() {
	grep -v -E '^migrate: ([0-9]+ pending|\[[0-9]+/[0-9]+\] running)' "$1" | grep -v '^$' | head -n 1
}

tags=0 targets=' ' ran_paths=0 ok=0 failed=0 refused=0 untargeted=0 skipped=0
failures=''
old_ifs=$IFS
# The list splits at newlines; each line's words at the usual blanks.
IFS='
'
for release in $releases; do
	IFS=$old_ifs
	set -f
	# shellcheck disable=SC2086 # split the line into its words
	set -- $release
	set +f
	tag=$1
	target=''
	for word in "$@"; do
		case $word in target=*) target=${word#target=} ;; esac
	done
	if [ -n "$wanted" ] && ! printf '%s' "$wanted" | grep -q -x -F -e "$tag"; then
		continue
	fi
	tags=$((tags + 1))
	if [ -z "$target" ]; then
		untargeted=$((untargeted + 1))
		echo "$tag no target: its runner predates the version ConfigMap (nothing to adopt; run refuses until adopted)"
		continue
	fi
	case $targets in
	*" $target "*)
		if [ -n "$per_target" ]; then
			skipped=$((skipped + 1))
			continue
		fi
		;;
	*) targets="$targets$target " ;;
	esac
	ran_paths=$((ran_paths + 1))

	dir=$work/$tag
	rm -rf "$dir"
	mkdir -p "$dir"
	ledger="file:$dir/ledger.json"
	version=${tag#v}
	printf '[{"revision": 1, "updated": "2026-01-01T00:00:00Z", "status": "deployed", "chart": "%s-%s", "app_version": "%s", "description": "Install complete"}]\n' \
		"$chart" "$version" "$version" >"$dir/history.json"

	rc=0
	engine adopt "$tree" --legacy-version "$target" --ledger "$ledger" \
		--helm-history "$dir/history.json" >"$dir/adopt.log" 2>&1 || rc=$?
	if [ "$rc" != 0 ]; then
		refused=$((refused + 1))
		failures="$failures $tag"
		echo "$tag target=$target refused (adopt) exit $rc: $(first_problem "$dir/adopt.log")"
		continue
	fi
	answered=$(grep -c 'recorded legacy from the release history' "$dir/adopt.log" || true)
	# The status summary's counts, after "LEDGER: ".
	adopted=$("$migrate" status --ledger "$ledger" | head -n 1 | sed 's/^.*: //')

	rc=0
	engine run "$tree" --ledger "$ledger" >"$dir/run.log" 2>&1 || rc=$?
	executed=$(grep -c -E '^migrate: \[[0-9]+/[0-9]+\] running ' "$dir/run.log" || true)
	after=$("$migrate" status --ledger "$ledger" | head -n 1 | sed 's/^.*: //')
	line="$tag target=$target adopted: $adopted ($answered from the history); ran $executed"
	if [ "$rc" = 0 ]; then
		ok=$((ok + 1))
		echo "$line; ok ($after)"
		continue
	fi
	failures="$failures $tag"
	# "migrate: migration SLUG failed (REASON); ..." names the script that stopped the run.
	stopped=$(sed -n 's/^migrate: migration \([^ ]*\) failed (\([^)]*\)).*/\1 (\2)/p' "$dir/run.log" | head -n 1)
	if [ "$executed" -gt 0 ] && [ -n "$stopped" ]; then
		failed=$((failed + 1))
		echo "$line; failed $stopped exit $rc"
	else
		refused=$((refused + 1))
		echo "$line; refused (run) exit $rc: $(first_problem "$dir/run.log")"
	fi
done
IFS=$old_ifs

distinct=$(printf '%s' "$targets" | wc -w | tr -d ' ')
echo "paths: $tags tags, $distinct distinct targets; ran $ran_paths ($skipped skipped, a target already run); ok $ok, failed $failed, refused $refused, no target $untargeted"
if [ -n "$failures" ]; then
	echo "upgrade-paths.sh: not every path ran:$failures" >&2
	exit 1
fi
