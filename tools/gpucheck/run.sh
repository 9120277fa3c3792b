#!/usr/bin/env bash
# One-shot check of the agent's NVML path on a real NVIDIA GPU (not CI): start a profile whose
# "server" holds real GPU memory in a child process (tools/gpucheck/fake_sglang), watch the GPU
# pane's attribution, swap to a second one (the swap must wait for the memory to come back),
# stop, and check that nothing is left on the GPU. Writes what it saw to ${OUT:-/tmp/gpucheck-out}.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/gpucheck-out}; mkdir -p "$OUT"
W=$(mktemp -d); P=$W/profiles; mkdir -p "$P"
export SGLTUI_STATE_DIR=$W/state SGLTUI_STOP_GRACE_S=5
PP="$ROOT/tools/gpucheck/fake_sglang:$ROOT:${PYTHONPATH:-}"
for spec in "gpu-a 8 31100" "gpu-b 16 31100"; do
  set -- $spec
  cat > "$P/$1.toml" <<TOML
name = "$1"
launcher = "sglang"
python = "$(command -v python3)"
[server]
model-path = "meta-llama/Llama-3.1-8B-Instruct"
port = $3
enable-metrics = true
[env]
GPU_HOLD_GIB = "$2"
PYTHONPATH = "$PP"
TOML
done
sg() { python3 -m sgltui --profiles "$P" "$@"; }
step() { echo; echo "=== $*"; }
step "nvidia-smi before"; nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv
step "start gpu-a (holds 8 GiB)"; sg start gpu-a; sleep 3
step "top"; sg top --once
sg status --json > "$OUT/status-a.json"
step "TUI screenshot (GPU pane)"; python3 "$ROOT/tools/gpucheck/tui_shot.py" "$SGLTUI_STATE_DIR" "$P" "$OUT/tui-gpu-a.svg" 6
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
step "swap to gpu-b (holds 16 GiB)"; sg swap gpu-b; sleep 3
step "top"; sg top --once
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
step "stop"; sg stop
step "nvidia-smi after stop (no compute process expected)"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
nvidia-smi --query-gpu=memory.used --format=csv
step "agent stop"; sg agent stop
S=$(ls -d "$SGLTUI_STATE_DIR"/sessions/* | tail -1)
cp "$S/events.jsonl" "$OUT/events.jsonl"
sg report "$S" > "$OUT/report.md"
step "swap timings"; grep '"swap.done"' "$S/events.jsonl"
step "leftover processes"; ps -eo pid,pgid,cmd | grep -E "sgltui|sglang|GPU_HOLD|torch" | grep -v grep || echo none
