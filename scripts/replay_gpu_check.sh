#!/usr/bin/env bash
# The whole replay check on one GPU, in one run (about 6 minutes on one H200 when a 1M-token
# prefill of the 1.2 B model takes about 2 minutes; each 1M row runs two such prefills):
#
#   1. the sample incident: ingested and analysed, then its suspects replayed on CUDA and on
#      the CPU: the verdicts and output hashes must be identical (every receiver confirmed);
#   2. speed: a Llama shape of about 1.2 B parameters with random bfloat16 weights made on the
#      GPU (nothing downloaded): per context (8k, 128k, 1M tokens) the model's own prefill
#      tokens/s (one SDPA forward pass), the replay tokens/s of one stub suspect over the same
#      context, and their ratio. At 1M the suspect read 64 leakers' KV (16k tokens each); at
#      8k and 128k one leaker wrote the whole context.
#
#   bash scripts/replay_gpu_check.sh [CASE_DIR]      (default: data_samples/incident)
#
# Needs a CUDA build of torch and the project with its replay extra (pip install -e '.[replay]').
# Set PYTHON to choose the interpreter (default: python3), CONTEXTS and LEAKERS to change the
# speed rows (comma-separated), DEVICE=cpu to dry-run the same steps without a GPU (with small
# CONTEXTS). Exit 0 when the devices agree and every speed row reached a verdict.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
CASE="${1:-data_samples/incident}"
DEVICE="${DEVICE:-cuda}"
CONTEXTS="${CONTEXTS:-8192,131072,1048576}"
LEAKERS="${LEAKERS:-1,1,64}"
MODEL="${MODEL:-random-1b}"
export DEVICE
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
SECONDS=0

"$PY" - <<'PYCHECK'
import os
import sys
try:
    import torch, transformers, safetensors, duckdb  # noqa: F401
except ImportError as exc:
    sys.exit(f"replay needs the project and its extra: pip install -e '.[replay]' ({exc})")
from importlib.util import find_spec
if os.environ["DEVICE"] != "cpu" and not torch.cuda.is_available():
    sys.exit(f"torch {torch.__version__} sees no CUDA device (a CPU-only build?)")
line = f"torch {torch.__version__}, transformers {transformers.__version__}, "
line += f"flash-attn {'installed' if find_spec('flash_attn') else 'not installed (SDPA)'}, "
if torch.cuda.is_available():
    free, total = torch.cuda.mem_get_info()
    line += f"{torch.cuda.get_device_name(0)} ({free / 2**30:.0f} of {total / 2**30:.0f} GiB free)"
else:
    line += "no GPU"
print(line, flush=True)
PYCHECK

[ -d "$CASE" ] || { echo "no case folder at $CASE" >&2; exit 2; }
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

echo "== 1. sample incident: $DEVICE against cpu"
# ingest and analyze exit 1 when they find something: that is expected for the sample.
"$PY" -m forensics ingest "$CASE" --db "$OUT/case.duckdb" --json > "$OUT/ingest.json" \
  || [ $? -eq 1 ]
"$PY" -m forensics analyze --db "$OUT/case.duckdb" --json > "$OUT/analyze.json" || [ $? -eq 1 ]
"$PY" scripts/replay_bench.py --db "$OUT/case.duckdb" --model test --device "$DEVICE" \
  --truth "$CASE/ground_truth/receiving_requests.csv" --compare cpu | tee "$OUT/sample.txt"
SAMPLE_S=$SECONDS
echo "(${SAMPLE_S} s so far)"

echo "== 2. speed: $MODEL on $DEVICE, contexts $CONTEXTS (leakers $LEAKERS)"
"$PY" scripts/replay_bench.py --speed --model "$MODEL" --device "$DEVICE" \
  --contexts "$CONTEXTS" --leakers "$LEAKERS" | tee "$OUT/speed.txt"

echo
echo "== summary (${SECONDS} s in all)"
grep -E "verdicts and output hashes" "$OUT/sample.txt"
echo "sample: $(grep -c ' confirmed ' "$OUT/sample.txt") confirmed rows over both devices (${SAMPLE_S} s)"
cat "$OUT/speed.txt"
if grep -qE "cannot-replay|DIFFER" "$OUT/sample.txt" "$OUT/speed.txt"; then
  exit 1
fi
