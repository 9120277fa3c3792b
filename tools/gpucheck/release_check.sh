#!/usr/bin/env bash
# The release wait after a stop on a real NVIDIA GPU (not CI), both ways sgltui/agent/gpu/ can
# tell it: by pid (NVML lists the server's rank) and by used memory against the launch baseline
# (what a container gets; forced here with SGLTUI_GPU_RELEASE=used-memory). A profile whose
# "server" holds real GPU memory in a child (tools/gpucheck/fake_sglang) is started and stopped
# under a fresh agent per method; the stop report (release_method, memory_release time, bytes
# still held) and nvidia-smi before/after go to ${OUT:-/tmp/gpucheck-out}/release.txt.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/gpucheck-out}; mkdir -p "$OUT"
W=$(mktemp -d); P=$W/profiles; mkdir -p "$P"
export SGLTUI_STATE_DIR=$W/state SGLTUI_STOP_GRACE_S=5 PYTHONPATH="$ROOT:${PYTHONPATH:-}"
cat > "$P/gpu-hold.toml" <<TOML
name = "gpu-hold"
launcher = "sglang"
python = "$(command -v python3)"
[server]
model-path = "meta-llama/Llama-3.1-8B-Instruct"
port = 31101
[env]
GPU_HOLD_GIB = "${GIB:-12}"
PYTHONPATH = "$ROOT/tools/gpucheck/fake_sglang:$ROOT:${PYTHONPATH:-}"
TOML
sg() { python3 -m sgltui --profiles "$P" "$@"; }
for method in auto used-memory; do
  echo "=== method $method"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader
  if [ "$method" = auto ]; then unset SGLTUI_GPU_RELEASE; else export SGLTUI_GPU_RELEASE=$method; fi
  sg start gpu-hold || { tail -30 "$SGLTUI_STATE_DIR/agent.log"; exit 1; }
  sleep 2
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
  python3 - "$SGLTUI_STATE_DIR" "$P" <<'PY'
import json, sys
from sgltui.client import call_sync
res = call_sync(sys.argv[1], "stop", profiles_dirs=[sys.argv[2]], wait=True)
print(json.dumps(res.get("report", res), default=str))
PY
  nvidia-smi --query-gpu=memory.used --format=csv,noheader
  grep -h "GPU release told" "$SGLTUI_STATE_DIR/agent.log" || true
  sg agent stop
done
echo "=== leftover"; ps -eo pid,cmd | grep -E "GPU_HOLD|sglang|sgltui" | grep -v grep || echo none
