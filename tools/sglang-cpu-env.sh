#!/usr/bin/env bash
# Builds a CPU-only virtual environment that holds the real SGLang package (0.5.23 by default).
# It cannot serve a model (no GPU kernels run here), but it can:
#   - import SGLang's own argument parser: sglang.srt.server_args.ServerArgs.add_cli_args
#     (the ground truth for which flags, choices and defaults a real launch_server accepts)
#   - run SGLang's own benchmark client (with the offline tokenizer it writes to VENV_DIR/tiny-tokenizer)
#     : python -m sglang.bench_serving (or sglang.benchmark.serving)
#     against any server that speaks SGLang's HTTP API
# Usage: sglang-cpu-env.sh [VENV_DIR] [SGLANG_VERSION]      (defaults: /tmp/sglang-cpu-env 0.5.23)
# Takes a few minutes and about 6 GB of disk (torch comes from the machine's local wheel cache).
set -euo pipefail
V=${1:-/tmp/sglang-cpu-env}
VER=${2:-0.5.23}
if ! { [ -x "$V/bin/python" ] && "$V/bin/python" -c 'import sglang.srt.server_args' 2>/dev/null; }; then
python3 -m venv "$V"
"$V/bin/pip" install -q torch==2.14.1 torchvision==0.29.1
"$V/bin/pip" install -q --no-deps "sglang==$VER"
"$V/bin/pip" install -q "transformers==5.19.0" msgspec numpy triton IPython datasets \
  "apache-tvm-ffi==0.1.11" compressed-tensors gguf aiohttp tqdm pillow requests orjson fastapi uvicorn starlette pyzmq pybase64 sentencepiece setproctitle prometheus_client opentelemetry-api 2>&1 | grep -v -i warning || true
fi
"$V/bin/python" - <<'PY'
import argparse
from sglang.srt.server_args import ServerArgs
p = argparse.ArgumentParser()
ServerArgs.add_cli_args(p)
import sglang
print(f"sglang {sglang.__version__}: its server argument parser builds")
PY
[ -f "$V/tiny-tokenizer/tokenizer.json" ] || "$V/bin/python" "$(dirname "$0")/make-tiny-tokenizer.py" "$V/tiny-tokenizer" >/dev/null
echo "activate with: . $V/bin/activate"
echo "an offline word-level tokenizer for SGLang's bench client: $V/tiny-tokenizer"
echo "example: python -m sglang.bench_serving --backend sglang --host 127.0.0.1 --port PORT \\"
echo "  --dataset-name random-ids --tokenizer $V/tiny-tokenizer --num-prompts 50 \\"
echo "  --random-input-len 128 --random-output-len 64 --random-range-ratio 1.0 --max-concurrency 8"
