#!/usr/bin/env bash
# Run the test suite on the oldest release of every runtime dependency that pyproject.toml
# admits (each `name>=X` taken as `name==X`), in a virtual environment of its own, so that a
# lower bound the project states is one it was seen to work on.
#
#   scripts/oldest_deps.sh [DIR] [-- PYTEST ARGS]   (default DIR: .venv-oldest at the top)
#
# The extras the README's test command installs come at their usual releases (torch 2.13.0 as
# there: its oldest admitted release is a CUDA build of several GB). Needs the package index;
# takes as long as the suite, plus the install.
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
dir="$top/.venv-oldest"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  dir="$1"
  shift
fi
[ "${1:-}" = "--" ] && shift
pins="$(python3 - "$top/pyproject.toml" <<'EOF'
import re, sys, tomllib
deps = tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]
for dep in deps:
    m = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9][0-9A-Za-z.]*)", dep.split(";")[0].strip())
    if m:
        print(f"{m[1]}=={m[2]}")
EOF
)"
rm -rf "$dir"
python3 -m venv "$dir"
# shellcheck disable=SC2086  # one pin per word
"$dir/bin/pip" install -q --disable-pip-version-check torch==2.13.0 -e "$top[test,replay,ray]" $pins
echo "oldest admitted releases:" $pins
cd "$top"
"$dir/bin/python" -m pytest -q -p no:cacheprovider "$@"
