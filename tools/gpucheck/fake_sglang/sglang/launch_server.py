"""`python -m sglang.launch_server FLAGS` stand-in (see __init__): one child holds GPU_HOLD_GIB of
real GPU memory with torch on the GPU CUDA_VISIBLE_DEVICES gives it (a slot's GPU), like a TP
rank, then the simulator serves with the same flags: SGLang's HTTP API as smg polls it
(/health, /v1/models owned_by sglang, /server_info, /model_info, /v1/loads, completions and chat,
streaming and not). Without torch or CUDA it says so and holds nothing (the CPU dry run)."""

import os
import subprocess
import sys

HOLD = r"""
import os, sys, time
try:
    import torch
    ok = torch.cuda.is_available()
except ImportError:
    ok = False
if not ok:
    # CPU mode: no GPU to hold; said once so the dry run's log shows why no memory moved.
    print('gpu holder: no torch/CUDA here, holding nothing (CUDA_VISIBLE_DEVICES=%s)'
          % os.environ.get('CUDA_VISIBLE_DEVICES', ''), flush=True)
    sys.exit(0)
x = torch.empty(int(float(os.environ.get('GPU_HOLD_GIB', '8')) * 2**30), dtype=torch.uint8, device='cuda')
x.fill_(1)
torch.cuda.synchronize()
print('gpu holder: %.1f GiB held by pid %d on CUDA_VISIBLE_DEVICES=%s'
      % (x.numel() / 2**30, os.getpid(), os.environ.get('CUDA_VISIBLE_DEVICES', '')), flush=True)
while True:
    time.sleep(3600)
"""

if __name__ == "__main__":
    subprocess.Popen(
        [sys.executable, "-c", HOLD]
    )  # same process group: the agent's stop must get it
    sys.argv = [
        sys.argv[0],
        *sys.argv[1:],
        "--sim-time-scale",
        os.environ.get("SIM_TIME_SCALE", "0.05"),
    ]
    from sgltui.sim.server import main

    sys.exit(main())
