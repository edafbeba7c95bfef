#!/usr/bin/env bash
# Replay the sample incident on CUDA: prints the time per suspect and tokens per second, then
# replays it on the CPU too and checks that the verdicts and output hashes are identical.
#
#   bash scripts/replay_gpu_check.sh [CASE_DIR]      (default: data_samples/incident)
#
# Needs a CUDA build of torch, transformers and safetensors (pip install '.[replay]').
# Set PYTHON to choose the interpreter (default: python3); DEVICE=cpu dry-runs the same steps
# without a GPU. Exit 0 when both devices agree.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
CASE="${1:-data_samples/incident}"
DEVICE="${DEVICE:-cuda}"
export DEVICE
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

"$PY" - <<'PYCHECK'
import sys
try:
    import torch, transformers, safetensors  # noqa: F401
except ImportError as exc:
    sys.exit(f"replay needs its extra: pip install '.[replay]' ({exc})")
import os
if os.environ["DEVICE"] != "cpu" and not torch.cuda.is_available():
    sys.exit(f"torch {torch.__version__} sees no CUDA device (a CPU-only build?)")
print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
      f"{torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU'}")
PYCHECK

[ -d "$CASE" ] || { echo "no case folder at $CASE" >&2; exit 2; }
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
# investigate exits 1 when it finds something: that is expected for the sample.
"$PY" -m forensics investigate "$CASE" --out "$OUT/out" --json > "$OUT/investigate.json" \
  || [ $? -eq 1 ]
"$PY" scripts/replay_bench.py --db "$OUT/out/case.duckdb" --model test --device "$DEVICE" \
  --truth "$CASE/ground_truth/receiving_requests.csv" \
  --compare cpu
