#!/usr/bin/env bash
# tools/check_layers catches what it is there to catch: on a small tree with
# one planted offence at a time it must fail and name the file, and on the
# same tree without it pass.
set -uo pipefail
check="$(cd "$(dirname "$0")/../.." && pwd)/tools/check_layers"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/core" "$root/kernels" "$root/nn"
printf '#include "core/tensor.h"\nint relu() { return 0; }\n' > "$root/kernels/relu.cpp"
printf 'int tensor();\n' > "$root/core/tensor.h"
"$check" "$root" > "$root/out" || { echo "clean tree refused:"; cat "$root/out"; exit 1; }
expect() {  # FILE CONTENT WORDS: planting CONTENT in FILE must fail with WORDS
    printf '%s\n' "$2" > "$root/$1"
    if "$check" "$root" > "$root/out"; then
        echo "not caught: $1: $2"
        exit 1
    fi
    grep -q "$1.*$3" "$root/out" || { echo "no '$3' for $1:"; cat "$root/out"; exit 1; }
    rm "$root/$1"
}
expect kernels/front.cpp 'bool f(const Tensor& t) { return t.device().is_cuda(); }' "tests the device"
expect kernels/front2.cpp 'bool g(Device d) { return d.type == DeviceType::cpu; }' "tests the device"
expect core/up.h '#include "nn/module.h"' "sits above it"
expect nn/alias.cpp 'namespace k = ember::kernels;' "one-letter alias"
mkdir -p "$root/kernels/cpu"
printf '#include "../core/tensor.h"\nint conv();\n' > "$root/kernels/conv.h"
expect kernels/cpu/conv.h '#include "../conv.h"' "reaches Tensor"
rm "$root/kernels/conv.h"
# The exceptions stay allowed.
printf 'bool f(Device d) { return d.is_cuda(); }\n' > "$root/kernels/copy.cpp"
"$check" "$root" > "$root/out" || { echo "kernels/copy.cpp refused:"; cat "$root/out"; exit 1; }
echo "check_layers_planted: ok"
