#!/usr/bin/env bash
# train_fashion_mnist on a Fashion-MNIST folder whose splits hold no samples
# (valid IDX headers, 0 images, 0 labels): it must stop at once with an error
# that names the files, never spin. Usage: empty_fashion_mnist.sh <train_fashion_mnist>
set -uo pipefail
exe=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/fashion-mnist"
for split in train t10k; do
    printf '\x00\x00\x08\x03\x00\x00\x00\x00\x00\x00\x00\x1c\x00\x00\x00\x1c' \
        >"$dir/fashion-mnist/$split-images-idx3-ubyte"
    printf '\x00\x00\x08\x01\x00\x00\x00\x00' >"$dir/fashion-mnist/$split-labels-idx1-ubyte"
done
out=$(EMBER_DATA="$dir" timeout 20 "$exe" mlp 10 2>&1)
rc=$?
echo "$out"
if [ "$rc" -eq 124 ]; then
    echo "FAIL: still running after 20 s on empty data"
    exit 1
fi
if [ "$rc" -eq 0 ] || ! grep -q "train-images-idx3-ubyte and .*train-labels-idx1-ubyte hold no samples" <<<"$out"; then
    echo "FAIL: expected a non-zero exit and an error naming the empty files (exit code $rc)"
    exit 1
fi
echo "ok: refused with exit code $rc"
