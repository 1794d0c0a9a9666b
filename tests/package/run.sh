#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, then configures, builds and
# runs tests/package as an outside project would.
set -euo pipefail
build_dir="$(cd "$1" && pwd)"
src_dir="$(cd "$(dirname "$0")" && pwd)"
work="$build_dir/package-test"
rm -rf "$work"
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$src_dir" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer"
