#!/usr/bin/env bash
# Download the wheels the replay check needs on a GPU machine without network access, into an
# ignored folder of the repository (default .whl/, emptied of wheels first), for CPython 3.12
# on x86-64 Linux.
#
# The GPU machine image this is for has Python 3.12, torch, transformers, accelerate, numpy,
# numba, pyarrow, pandas, jinja2, rich and matplotlib, and an older typer; not the database the
# project reads a case with (duckdb), nor zstandard, nor polars. What `kvforensics ingest`,
# `analyze`, `replay` and `report` import beyond that image, with everything those need in
# turn (the closure), is:
#
#   duckdb, zstandard, typer 0.29 (the version the project is tested with; it carries its own
#   click) and what it requires: pydantic, pydantic-core, annotated-types, typing-inspection,
#   typing-extensions >= 4.16 (newer than the image's), annotated-doc and shellingham
#
# polars is left out: only the simulator uses it, and its wheels (about 34 MB) would more than
# double the set. cryptography is left out: only signing (investigate --sign-key, verify
# --pubkey) imports it. For an image without matplotlib, add it and its compiled parts with
# EXTRA="matplotlib==3.11.2 contourpy==1.3.3 cycler==0.12.1 fonttools==4.68.0 kiwisolver==1.5.1
# pyparsing==3.3.3 pillow==13.0.0 python-dateutil==2.9.0.post0 six==1.17.0 packaging==26.4".
#
#   bash scripts/fetch_wheels.sh [--python-version X.Y] [--dry-run] [FOLDER]   (default: .whl)
#
# --python-version (or PYVER; default 3.12) chooses the target interpreter, PACKAGES the list
# (NAME==VERSION, spaces between), EXTRA more of them. Then, with the folder inside the
# checkout, on the GPU machine:
#
#   WHEELS=.whl bash scripts/replay_gpu_check.sh
#
# which installs them with --no-index --no-deps into a scratch folder put on PYTHONPATH.
#
# --dry-run proves the set complete on this machine (a few minutes; needs network access for
# the image's packages): it fetches the same list for this machine's Python (PYTHON, default
# python3) into a scratch folder, builds a fresh virtual environment there without the system's
# site packages, installs the image's packages that matter here (IMAGE_PACKAGES: torch's CPU
# build, transformers, accelerate, numpy, numba, pyarrow, pandas, jinja2, rich, matplotlib, an
# older typer and typing-extensions) from the configured index, then ONLY the fetched wheels
# (pip --no-index --find-links: pip refuses if any requirement of theirs is neither there nor
# in the image), and runs ingest, analyze, replay --model test and report on
# data_samples/incident from the checkout (PYTHONPATH, as replay_gpu_check.sh does). Exit 0
# when all of that passes and replay confirms every suspect; SCRATCH=FOLDER keeps the scratch.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
PYVER="${PYVER:-3.12}"
PY="${PYTHON:-python3}"
DRY=0
DEST=""
while [ $# -gt 0 ]; do
  case "$1" in
    --python-version) PYVER="$2"; shift 2 ;;
    --python-version=*) PYVER="${1#*=}"; shift ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    -*) echo "unknown option $1 (--python-version X.Y, --dry-run, FOLDER)" >&2; exit 2 ;;
    *) DEST="$1"; shift ;;
  esac
done
DEST="${DEST:-.whl}"
PACKAGES="${PACKAGES:-duckdb==2.0.1 zstandard==0.25.0 typer==0.29.2 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0 annotated-doc==0.0.7 shellingham==1.5.4}"
PACKAGES="$PACKAGES${EXTRA:+ $EXTRA}"
IMAGE_PACKAGES="${IMAGE_PACKAGES:-torch==2.13.0 transformers accelerate numpy numba pyarrow pandas jinja2 rich matplotlib typer<0.29 typing-extensions<4.16}"

# fetch FOLDER PYVER: the list's wheels, without their dependencies (the list is the closure).
fetch() {
  mkdir -p "$1"
  rm -f "$1"/*.whl  # the folder holds exactly this set (older versions would clash)
  # shellcheck disable=SC2086  # PACKAGES is a list of requirement specifiers
  "$PY" -m pip download -q --no-deps --only-binary=:all: \
    --python-version "$2" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$1" $PACKAGES
}

if [ "$DRY" = 0 ]; then
  fetch "$DEST" "$PYVER"
  ls -l "$DEST"/*.whl
  du -ch "$DEST"/*.whl | tail -1
  exit 0
fi

HERE="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
[ "$HERE" = "$PYVER" ] || echo "(dry run: wheels for this machine's Python $HERE; the GPU image's are for $PYVER)"
if [ -n "${SCRATCH:-}" ]; then
  mkdir -p "$SCRATCH"
else
  SCRATCH="$(mktemp -d)"
  trap 'rm -rf "$SCRATCH"' EXIT
fi
SECONDS=0
echo "== 1. the list's wheels for Python $HERE into $SCRATCH/wheels"
fetch "$SCRATCH/wheels" "$HERE"
echo "== 2. a fresh virtual environment with the image's packages ($IMAGE_PACKAGES)"
rm -rf "$SCRATCH/venv"
"$PY" -m venv "$SCRATCH/venv"
V="$SCRATCH/venv/bin/python"
# shellcheck disable=SC2086  # IMAGE_PACKAGES is a list of requirement specifiers
"$V" -m pip install -q --disable-pip-version-check $IMAGE_PACKAGES
echo "== 3. only the fetched wheels (--no-index --find-links)"
"$V" -m pip install -q --disable-pip-version-check --no-index --find-links "$SCRATCH/wheels" \
  "$SCRATCH"/wheels/*.whl
"$V" - << 'PYCHECK'
from importlib.metadata import version

print(", ".join(f"{n} {version(n)}" for n in (
    "torch", "transformers", "numpy", "pyarrow", "duckdb", "zstandard", "typer", "pydantic",
    "typing-extensions")))
PYCHECK
for absent in polars cryptography; do
  if "$V" -c "import $absent" 2> /dev/null; then
    echo "(note: $absent is installed in the dry-run environment, so its absence is not tested)"
  fi
done
echo "== 4. ingest, analyze, replay --model test and report on data_samples/incident"
export PYTHONPATH="$ROOT" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
DB="$SCRATCH/case.duckdb"
rm -f "$DB"
run() {  # a command that exits 0 (clean) or 1 (findings)
  local rc=0
  "$V" -m forensics "$@" > "$SCRATCH/out.json" || rc=$?
  if [ $rc -gt 1 ]; then
    echo "kvforensics $1 failed (exit $rc)" >&2
    exit 1
  fi
}
run ingest data_samples/incident --db "$DB" --json
run analyze --db "$DB" --json
run replay --db "$DB" --model test --device cpu --json
"$V" - "$SCRATCH/out.json" << 'PYCHECK'
import json
import sys

data = json.load(open(sys.argv[1]))
print(json.dumps({k: v for k, v in data.items() if not isinstance(v, (list, dict))}))
PYCHECK
run report --db "$DB" --out "$SCRATCH/report" --json
"$V" - "$DB" << 'PYCHECK'
import sys

import duckdb

con = duckdb.connect(sys.argv[1], read_only=True)
rows = con.execute("SELECT verdict, count(*) FROM replay_results GROUP BY 1 ORDER BY 1").fetchall()
print("replay verdicts:", rows)
if not rows or any(verdict != "confirmed" for verdict, _ in rows):
    sys.exit("dry run FAILED: a suspect of the sample incident was not confirmed")
PYCHECK
test -s "$SCRATCH/report/report.html"
echo "dry run passed in ${SECONDS} s: the fetched wheels and the image's packages are enough"
