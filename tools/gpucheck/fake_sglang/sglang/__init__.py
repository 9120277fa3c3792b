"""A stand-in `sglang` package for tools/gpucheck/run.sh: not SGLang. It runs sgltui's simulator for
the API and log lines, plus a child process that holds real GPU memory like a scheduler rank."""

__version__ = "0.5.23"
