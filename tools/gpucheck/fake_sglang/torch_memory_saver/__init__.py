"""Not torch-memory-saver: the fake SGLang's stand-in, so that sgltui's preflight of a standby
(agent/swap/saver_check.py: importable, version >= 0.0.10, in the profile's own python) passes for
the fake, whose GPU holder (sglang/gpu_holder.py) does what the saver does: the bytes to pinned
host memory and back, and exit(1) on a second pause or a resume of what is not paused."""
