#!/usr/bin/env bash
# Builds everything and runs the whole test suite (unit, golden and end-to-end tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j2 --timeout 600 "$@"
