#!/usr/bin/env bash
# Run the test suite on the oldest release of every runtime dependency that pyproject.toml
# admits, and of the replay extra's (each `name>=X` taken as `name==X`), in a virtual
# environment of its own, so that a lower bound the project states is one it was seen to work on.
#
#   scripts/oldest_deps.sh [DIR] [-- PYTEST ARGS]   (default DIR: .venv-oldest at the top)
#
# torch stays 2.13.0, as in the README's test command (its oldest admitted release is a CUDA
# build of several GB), and the other extras that command installs come at their usual
# releases. Needs the package index; takes as long as the suite, plus the install.
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
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
deps = project["dependencies"] + project["optional-dependencies"]["replay"]
for dep in deps:
    m = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9][0-9A-Za-z.]*)", dep.split(";")[0].strip())
    if m and m[1] != "torch":
        print(f"{m[1]}=={m[2]}")
EOF
)"
# DIR is replaced only where it is a virtual environment (or absent): never another folder.
if [ -e "$dir" ] && [ ! -f "$dir/pyvenv.cfg" ]; then
  echo "oldest_deps.sh: $dir exists and is not a virtual environment; give another DIR" >&2
  exit 2
fi
rm -rf "$dir"
python3 -m venv "$dir"
# shellcheck disable=SC2086  # one pin per word
"$dir/bin/pip" install -q --disable-pip-version-check torch==2.13.0 -e "$top[test,replay,ray]" $pins
echo "oldest admitted releases:" $pins
cd "$top"
"$dir/bin/python" -m pytest -q -p no:cacheprovider "$@"
