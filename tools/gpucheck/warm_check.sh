#!/usr/bin/env bash
# Issue 34 item 6 on a one-GPU machine in one command (README: warm_check). Installs the carried
# wheels (tomli-w; nothing can be fetched there), then tools/gpucheck/warm_check.py with $OUT.
#   warm_check.sh --probe     versions, the card, pinning and pinned bandwidth of 4 GiB (~20 s)
#   warm_check.sh [ARGS]      the warm vs cold swap check (ARGS pass through: --gib, --repeats)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/gpucheck-out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls "$ROOT"/.whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$ROOT"/.whl/*.whl && export PYTHONPATH=/tmp/site:${PYTHONPATH:-} || exit 1
fi
set -o pipefail
nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version,pcie.link.gen.max,pcie.link.width.max \
  --format=csv 2>&1 | tee "$OUT/nvidia-smi.txt"
if [ "${1:-}" = "--probe" ]; then
  shift
  PYTHONUNBUFFERED=1 python3 "$ROOT/tools/gpucheck/pinned_probe.py" "$OUT" "$@" 2>&1 | tee "$OUT/probe.log"
  exit "${PIPESTATUS[0]}"
fi
# Fail in seconds, not minutes, when a carried wheel is missing or does not import there.
(cd "$ROOT" && python3 -c "import aiohttp, tomli_w, sgltui.sim.server; print('imports ok')") \
  2>&1 | tee "$OUT/imports.txt" || { echo "carry the wheels: tools/gpucheck/README.md"; exit 2; }
GC_WORK=$(mktemp -d) PYTHONUNBUFFERED=1 python3 "$ROOT/tools/gpucheck/warm_check.py" "$OUT" "$@" \
  2>&1 | tee "$OUT/warm_check.log"
rc=${PIPESTATUS[0]}
echo "=== leftover"; ps -eo pid,cmd | grep -E "gpu_holder|launch_server" | grep -v grep || echo none
nvidia-smi --query-gpu=memory.used --format=csv 2>&1
exit "$rc"
