#!/usr/bin/env bash
# Builds everything and runs the test suite (unit, golden and end-to-end tests; the long runs
# labelled `slow` are left out: `ctest --test-dir build -L slow` runs them).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j2 --timeout 600 -LE slow "$@"
