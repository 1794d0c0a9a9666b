#!/usr/bin/env bash
# `ember plot` end to end: on a copy of tests/tools/runs/good it prints the
# path of curves.svg, which Python's standard XML parser reads as an SVG with
# the three charts; a missing directory, a directory without metrics.jsonl
# and a malformed line are each one "ember: error:" line and exit status 1.
# Usage: plot_cli.sh EMBER RUNS_DIR WORK_DIR PYTHON3
set -uo pipefail
ember=$1 runs=$2 work=$3 python=$4
fail() { echo "plot_cli: $*" >&2; exit 1; }

rm -rf "$work" && mkdir -p "$work/empty" || fail "cannot make $work"
cp -r "$runs/good" "$work/good" && cp -r "$runs/bad" "$work/bad" || fail "cannot copy the runs"

out=$("$ember" plot "$work/good") || fail "ember plot failed on a good run"
[ "$out" = "$work/good/curves.svg" ] || fail "printed '$out', not the SVG's path"
[ -s "$work/good/curves.svg" ] || fail "no curves.svg"
"$python" - "$work/good/curves.svg" <<'PY' || fail "curves.svg is not the expected SVG"
import sys
import xml.etree.ElementTree as ET
ns = {"svg": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
charts = root.findall("svg:g[@class='chart']", ns)
assert len(charts) == 3, len(charts)
titles = [c.find("svg:text[@class='title']", ns).text for c in charts]
assert titles[0] == "good: loss" and titles[2] == "learning rate", titles
series = root.findall(".//svg:path[@class='series']", ns)
assert len(series) == 5, len(series)
PY

# Each error: exit status 1, exactly one line on stderr, naming the problem.
expect_error() {
    local want=$1 dir=$2
    "$ember" plot "$dir" >"$work/stdout" 2>"$work/stderr"
    local rc=$?
    [ "$rc" = 1 ] || fail "ember plot $dir: exit status $rc, expected 1"
    [ "$(wc -l <"$work/stderr")" = 1 ] ||
        fail "ember plot $dir: not one line: $(cat "$work/stderr")"
    grep -qE "^ember: error: .*$want" "$work/stderr" ||
        fail "ember plot $dir: '$(cat "$work/stderr")' does not match '$want'"
}
expect_error "'$work/nosuch' does not exist" "$work/nosuch"
expect_error "'$work/empty' has no metrics.jsonl" "$work/empty"
expect_error "$work/bad/metrics.jsonl:3: not valid JSON" "$work/bad"
[ ! -e "$work/bad/curves.svg" ] || fail "a malformed run still got a curves.svg"
echo "plot_cli: ok"
