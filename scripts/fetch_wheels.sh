#!/usr/bin/env bash
# Download the wheels the replay check needs on a GPU machine without network access, into an
# ignored folder of the repository (default .whl/, emptied of wheels first), for CPython 3.12
# on x86-64 Linux.
#
# Such a machine usually has torch, transformers, accelerate, safetensors, numpy, numba,
# pyarrow, pandas, jinja2 and rich, but not the database the project reads a case with, nor
# the plotting library its report imports; its typer may be older than the project needs. This
# fetches exactly those, without their dependencies (which that machine already has):
#
#   duckdb, zstandard, matplotlib and its compiled parts, typer and click (the versions the
#   project is tested with; typer 0.29 needs a recent click)
#
# polars is left out: only the simulator uses it, and its wheels (about 34 MB) would make the
# set about 70 % larger.
#
#   bash scripts/fetch_wheels.sh [FOLDER]          (default: .whl)
#
# PYVER (default 3.12) chooses the target interpreter, PACKAGES the list (NAME==VERSION, spaces
# between). Then, with the folder inside the checkout, on the GPU machine:
#
#   WHEELS=.whl bash scripts/replay_gpu_check.sh
#
# which installs them with --no-index --no-deps into a scratch folder put on PYTHONPATH.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="${1:-.whl}"
PYVER="${PYVER:-3.12}"
PY="${PYTHON:-python3}"
PACKAGES="${PACKAGES:-duckdb==2.0.1 zstandard==0.25.0 matplotlib==3.11.2 contourpy==1.3.3 cycler==0.12.1 fonttools==4.68.0 kiwisolver==1.5.1 pyparsing==3.3.3 typer==0.29.2 click==8.5.1}"

mkdir -p "$DEST"
rm -f "$DEST"/*.whl  # the folder holds exactly this set (older versions would clash)
# shellcheck disable=SC2086  # PACKAGES is a list of requirement specifiers
"$PY" -m pip download -q --no-deps --only-binary=:all: \
  --python-version "$PYVER" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$DEST" $PACKAGES
ls -l "$DEST"/*.whl
du -ch "$DEST"/*.whl | tail -1
