#!/usr/bin/env bash
# Issue 30 on nvidia-h200-x2 in one command (README: the `run` call). Installs the carried
# wheels (smg; nothing can be fetched there), then tools/gpucheck/pool_check.py with $OUT.
# Extra arguments pass through: `--simulated-gpus 2` is the CPU dry run here, `--gpus 1` the
# one-GPU machine (nvidia-h200).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/gpucheck-out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls "$ROOT"/.whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$ROOT"/.whl/*.whl && export PYTHONPATH=/tmp/site:${PYTHONPATH:-} || exit 1
  export PATH=/tmp/site/bin:$PATH
fi
# Fail in seconds, not minutes, when a carried wheel is missing or does not import there.
set -o pipefail
python3 -c "import smg, textual, msgspec, tomli_w, httpx_aiohttp, grpc; print('imports ok')" \
  2>&1 | tee "$OUT/imports.txt" || { echo "carry the wheels: tools/gpucheck/README.md"; exit 2; }
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.device_count(), 'GPUs')" \
  2>&1 | tail -1 | tee -a "$OUT/imports.txt"  # absent on the CPU dry run: the holders say so
nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv 2>&1 | tee "$OUT/nvidia-smi.txt"
GC_WORK=$(mktemp -d) PYTHONUNBUFFERED=1 python3 "$ROOT/tools/gpucheck/pool_check.py" "$OUT" "$@" \
  2>&1 | tee "$OUT/pool_check.log"
rc=${PIPESTATUS[0]}
echo "=== leftover"; ps -eo pid,cmd | grep -E "GPU_HOLD|sglang|smg|sgltui" | grep -v grep || echo none
exit "$rc"
