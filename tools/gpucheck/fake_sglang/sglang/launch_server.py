"""`python -m sglang.launch_server FLAGS` stand-in (see __init__): one child holds GPU_HOLD_GIB of
real GPU memory with torch, like a TP rank, then the simulator serves with the same flags."""

import os
import subprocess
import sys

HOLD = r"""
import os, sys, time, torch
x = torch.empty(int(float(os.environ.get('GPU_HOLD_GIB', '8')) * 2**30), dtype=torch.uint8, device='cuda')
x.fill_(1)
torch.cuda.synchronize()
print('gpu holder: %.1f GiB held by pid %d' % (x.numel() / 2**30, os.getpid()), flush=True)
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
