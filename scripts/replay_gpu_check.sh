#!/usr/bin/env bash
# The whole replay check on one GPU, in one run, inside a fixed time budget. In order of the
# evidence it gives (the most important first, so that a run cut short still has it):
#
#   1. sample incident (budget SAMPLE_S=150 s; about 40 s on one H200): ingested, then its
#      ground-truth receivers replayed with the test model on $DEVICE and on the CPU: every
#      verdict and output-token hash must be identical, and every receiver confirmed on both.
#      (Without a ground-truth file, or with ANALYZE=1, the case is analysed first and its
#      suspects are replayed.)
#   2. speed, short contexts (budget SHORT_S=120 s; about 40 s): a Llama shape of about 1.2 B
#      parameters with random bfloat16 weights made on the GPU (nothing downloaded), at 8k and
#      128k tokens, one leaker writing the whole context: per row the model's own prefill
#      tokens/s (one SDPA forward pass), the replay tokens/s of one stub suspect over the same
#      context, their ratio and the verdict. A 128k prefill costs about 1/64 of a 1M one
#      (attention grows with the square of the context), so it runs before the 1M row.
#   3. speed at 1M tokens (whatever is left of TOTAL_S=540 s, about 7.5 min): the same row
#      with 64 leakers of 16k tokens each. It runs two 1M prefills (the plain one and the
#      suspect's clean one), each about 72 PFLOP of causal attention plus 2 PFLOP of weights:
#      1.6 min at the H200's 790 TFLOP/s bf16 peak, 2 to 4 min at the 40 to 75% of peak that
#      SDPA's kernels reach; with the rest of the row (writers, decodes: under a minute) 4 to 9
#      minutes. A row cut short still shows its plain prefill figure; STEPS=long reruns it
#      alone with the whole budget.
#
# Each step runs under `timeout` with the smaller of its budget and what is left of TOTAL_S,
# and prints as it goes (a row as soon as it is measured, the phases of a row as they end), so
# a step cut short still shows what it did. Exit 0 when the devices agree, every receiver is
# confirmed and every speed row reached a confirmed verdict; 1 when something differs, is
# missing or timed out; 2 when the environment is not usable.
#
#   bash scripts/replay_gpu_check.sh [CASE_DIR]      (default: data_samples/incident)
#
# Runs from the checkout (the project need not be installed: the repository goes on
# PYTHONPATH). WHEELS=FOLDER installs the wheels in FOLDER first (--no-index --no-deps, into
# SITE, default $TMPDIR/kvforensics-site, put on PYTHONPATH): on a machine without network
# access, bring them in the checkout (bash scripts/fetch_wheels.sh writes .whl/).
# PYTHON chooses the interpreter (default python3); DEVICE=cpu dry-runs the same steps without a
# GPU (with small CONTEXTS, e.g. CONTEXTS=256,1024 LEAKERS=1,4 MODEL=random-tiny); CONTEXTS and
# LEAKERS are comma-separated (the largest context runs last, on its own); MODEL is random-1b,
# random-tiny, test or a model folder; KEEP=FOLDER keeps every step's output there; STEPS
# (default sample,short,long) runs only the steps named, e.g. STEPS=long alone in a second
# run when one run's time is too short for all three.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT="$PWD"
PY="${PYTHON:-python3}"
CASE="${1:-data_samples/incident}"
DEVICE="${DEVICE:-cuda}"
MODEL="${MODEL:-random-1b}"
CONTEXTS="${CONTEXTS:-8192,131072,1048576}"
LEAKERS="${LEAKERS:-1,1,64}"
TOTAL_S="${TOTAL_S:-540}"
SAMPLE_S="${SAMPLE_S:-150}"
SHORT_S="${SHORT_S:-120}"
export DEVICE PYTHONUNBUFFERED=1
# Nothing is downloaded: no library should wait on a network that is not there.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
SECONDS=0

if [ -n "${WHEELS:-}" ]; then
  SITE="${SITE:-${TMPDIR:-/tmp}/kvforensics-site}"
  shopt -s nullglob
  wheels=("$WHEELS"/*.whl)
  shopt -u nullglob
  [ ${#wheels[@]} -gt 0 ] || { echo "no wheels in $WHEELS (bash scripts/fetch_wheels.sh)" >&2; exit 2; }
  echo "== 0. ${#wheels[@]} wheels from $WHEELS into $SITE"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$SITE" \
    "${wheels[@]}" || exit 2
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

"$PY" - <<'PYCHECK' || exit 2
import os
import sys
from importlib import import_module
from importlib.util import find_spec

for name in ("torch", "transformers", "duckdb", "forensics.cli", "forensics.replay.speed"):
    try:
        import_module(name)
    except ImportError as exc:
        sys.exit(
            f"cannot import {name}: {exc}. On a machine without network access, fetch the "
            "missing wheels elsewhere (bash scripts/fetch_wheels.sh) and run with WHEELS=.whl; "
            "else pip install -e '.[replay]'"
        )
import torch
import transformers

if os.environ["DEVICE"] != "cpu" and not torch.cuda.is_available():
    sys.exit(f"torch {torch.__version__} sees no CUDA device (a CPU-only build?)")
from importlib.metadata import version

line = f"python {sys.version.split()[0]}, torch {torch.__version__}, "
line += ", ".join(
    f"{name} {version(name)}"
    for name in ("transformers", "accelerate", "numpy", "numba", "pyarrow", "duckdb", "typer")
)
line += ", "
line += f"flash-attn {'installed' if find_spec('flash_attn') else 'not installed (SDPA)'}, "
if torch.cuda.is_available():
    free, total = torch.cuda.mem_get_info()
    line += f"{torch.cuda.get_device_name(0)} ({free / 2**30:.0f} of {total / 2**30:.0f} GiB free)"
else:
    line += "no GPU"
print(line, flush=True)
PYCHECK

[ -d "$CASE" ] || { echo "no case folder at $CASE" >&2; exit 2; }
if [ -n "${KEEP:-}" ]; then
  OUT="$KEEP"
  mkdir -p "$OUT" || exit 2
else
  OUT="$(mktemp -d)"
  trap 'rm -rf "$OUT"' EXIT
fi
GUARD=(timeout -k 10)
command -v timeout > /dev/null || { GUARD=(); echo "(no timeout command: steps run unguarded)"; }
FAILED=0
STEPS=",${STEPS:-sample,short,long},"
has() { [[ "$STEPS" == *",$1,"* ]]; }

# guard BUDGET COMMAND...: run COMMAND for at most BUDGET seconds and no longer than what is
# left of TOTAL_S (10 s are kept for the summary).
guard() {
  local budget=$1 left=$((TOTAL_S - SECONDS - 10)) rc
  shift
  [ "$budget" -le "$left" ] || budget=$left
  if [ "$budget" -lt 5 ]; then
    echo "  (not run: the ${TOTAL_S} s budget is spent)" >&2
    return 124
  fi
  if [ ${#GUARD[@]} -gt 0 ]; then "${GUARD[@]}" "$budget" "$@"; else "$@"; fi
  rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "  (stopped after ${budget} s: over its time budget)" >&2
  fi
  return $rc
}

# json_ok STEP RC FILE: a step that exits 0 (clean) or 1 (findings) with its JSON written.
json_ok() {
  if { [ "$2" -eq 0 ] || [ "$2" -eq 1 ]; } && "$PY" -c \
    "import json, sys; json.load(open(sys.argv[1]))" "$3" 2> /dev/null; then
    return 0
  fi
  echo "$1 failed (exit $2): see the lines above" >&2
  return 1
}

TRUTH="$CASE/ground_truth/receiving_requests.csv"
sample_step() {
  local picked truth
  SAMPLE_END=$((SECONDS + SAMPLE_S))
  echo "== 1. sample incident $CASE: $DEVICE against cpu (budget ${SAMPLE_S} s)"
  guard "$SAMPLE_S" "$PY" -m forensics ingest "$CASE" --db "$OUT/case.duckdb" --json \
    > "$OUT/ingest.json"
  if json_ok ingest $? "$OUT/ingest.json"; then
    picked=ok
    if [ ! -f "$TRUTH" ] || [ "${ANALYZE:-0}" = 1 ]; then
      guard $((SAMPLE_END - SECONDS)) "$PY" -m forensics analyze --db "$OUT/case.duckdb" --json \
        > "$OUT/analyze.json"
      json_ok analyze $? "$OUT/analyze.json" || picked=
    fi
    truth=()
    [ -f "$TRUTH" ] && truth=(--truth "$TRUTH")
    if [ -n "$picked" ]; then
      guard $((SAMPLE_END - SECONDS)) "$PY" scripts/replay_bench.py --db "$OUT/case.duckdb" \
        --model test --device "$DEVICE" "${truth[@]}" --compare cpu | tee "$OUT/sample.txt"
      [ "${PIPESTATUS[0]}" -eq 0 ] || FAILED=1
    else
      FAILED=1
    fi
  else
    FAILED=1
  fi
}
: > "$OUT/sample.txt"
if has sample; then sample_step; else echo "== 1. sample: not in STEPS"; fi
SAMPLE_DONE=$SECONDS
echo "(${SAMPLE_DONE} s so far)"

# The largest context runs last, on its own; the others first, together (one model build).
IFS=, read -ra ctx <<< "$CONTEXTS"
IFS=, read -ra lk <<< "$LEAKERS"
largest=0
for c in "${ctx[@]}"; do [ "$c" -gt "$largest" ] && largest=$c; done
short_c="" short_l="" long_l="" long_i=""
for i in "${!ctx[@]}"; do
  n="${lk[$i]:-${lk[${#lk[@]} - 1]}}"
  if [ "${ctx[$i]}" -eq "$largest" ] && [ -z "$long_l" ]; then
    long_l="$n" long_i="$i"
  else
    short_c="${short_c:+$short_c,}${ctx[$i]}"
    short_l="${short_l:+$short_l,}$n"
  fi
done

# speed NAME BUDGET CONTEXTS LEAKERS: one speed process, its rows into $OUT/NAME.txt.
speed() {
  local budget=$2 left=$((TOTAL_S - SECONDS - 10))
  [ "$budget" -le "$left" ] || budget=$left
  echo "== $1: $MODEL on $DEVICE, contexts $3 (leakers $4), budget $budget s"
  guard "$budget" "$PY" scripts/replay_bench.py --speed --model "$MODEL" --device "$DEVICE" \
    --contexts "$3" --leakers "$4" | tee "$OUT/$1.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || FAILED=1
}
: > "$OUT/speed-short.txt"
: > "$OUT/speed-long.txt"
if [ -n "$short_c" ] && has short; then speed speed-short "$SHORT_S" "$short_c" "$short_l"; fi
if has long; then speed speed-long "$TOTAL_S" "$largest" "$long_l"; fi

echo
echo "== summary (${SECONDS} s in all; sample ${SAMPLE_DONE} s)"
grep -E "verdicts and output hashes|suspect\(s\) in| of [0-9]+ confirmed" "$OUT/sample.txt" \
  || echo "sample: no result"
title="$(grep -h "^replay speed:" "$OUT/speed-short.txt" "$OUT/speed-long.txt" | head -1)"
echo "${title:-replay speed: no result}"
grep -h -m1 "^ *context " "$OUT/speed-short.txt" "$OUT/speed-long.txt" | head -1
for i in "${!ctx[@]}"; do
  c="${ctx[$i]}"
  if [ "$i" = "$long_i" ]; then has long || continue; else has short || continue; fi
  with_commas="$(sed -E ':a;s/([0-9])([0-9]{3})($|,)/\1,\2\3/;ta' <<< "$c")"
  row="$(grep -hE "^ *$with_commas " "$OUT/speed-short.txt" "$OUT/speed-long.txt" | head -1)"
  if [ -z "$row" ]; then
    row="$(printf '%10s  not measured (failed or cut short: see above)' "$c")"
    FAILED=1
  fi
  echo "$row"
done
if grep -qE "DIFFER|cannot-replay|not-reproduced" "$OUT/sample.txt" \
  "$OUT/speed-short.txt" "$OUT/speed-long.txt"; then
  FAILED=1
fi
[ "$FAILED" -eq 0 ] && echo "check passed" || echo "check FAILED"
exit "$FAILED"
