#!/usr/bin/env bash
# Issue 45 item 3 on a one-GPU machine in one command: installs the carried wheels (.whl: msgspec,
# tomli-w, httpx-aiohttp, orjson, ...; nothing can be fetched there), probes pinned bandwidth,
# then tools/gpucheck/agent_warm_check.py (the agent, standby add, warm/cold/hicache swaps under
# streaming clients through the front) with $OUT.  ARGS pass through (--gib, --toggles, --clients).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/gpucheck-out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls "$ROOT"/.whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$ROOT"/.whl/*.whl && export PYTHONPATH=/tmp/site:${PYTHONPATH:-} || exit 1
fi
set -o pipefail
nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version --format=csv 2>&1 | tee "$OUT/nvidia-smi.txt"
(cd "$ROOT" && python3 -c "import aiohttp, msgspec, tomli_w, httpx_aiohttp, sgltui.sim.server, sgltui.agent.supervisor; print('imports ok')") \
  2>&1 | tee "$OUT/imports.txt" || { echo "carry the wheels: tools/gpucheck/README.md"; exit 2; }
PYTHONUNBUFFERED=1 python3 "$ROOT/tools/gpucheck/pinned_probe.py" "$OUT" --gib 4 > "$OUT/probe.log" 2>&1
AW_WORK=$(mktemp -d) PYTHONUNBUFFERED=1 python3 "$ROOT/tools/gpucheck/agent_warm_check.py" "$OUT" "$ROOT" "$@" \
  2>&1 | tee "$OUT/agent_warm.log"
exit "${PIPESTATUS[0]}"
