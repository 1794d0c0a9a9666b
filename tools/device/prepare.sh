#!/usr/bin/env bash
# Copies the build dependencies (Eigen, Catch2, CLI11, nlohmann-json headers, zlib)
# with their CMake package files into .deps/usr (git-ignored), keeping Debian's
# layout, so a machine without these packages can configure ember with
# -DCMAKE_PREFIX_PATH=$PWD/.deps/usr. Run here, then carry `.deps` to the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
tools/dev setup
rm -rf .deps
for pkg in libeigen3-dev catch2 libcli11-dev nlohmann-json3-dev zlib1g-dev; do
    dpkg -L "$pkg" | while read -r f; do
        case "$f" in /usr/share/doc/*|/usr/share/man/*|/usr/share/pkgconfig/*) continue ;; esac
        [ -f "$f" ] || continue
        mkdir -p ".deps$(dirname "$f")"
        cp "$f" ".deps$f"
    done
done
du -sh .deps
