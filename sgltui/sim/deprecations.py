"""Deprecated SGLang flags, accepted the way SGLang 0.5.23 accepts them: the same warning lines,
then the same translation into their successors.

Two kinds of line, as in SGLang:
- at parse time, flags registered with DeprecatedStoreTrueAction print
  `'--flag' is deprecated and will be removed in a future release. Use 'NEW' instead.` in bold
  yellow, before logging is configured (sglang/srt/arg_groups/argparse_actions.py);
- during argument resolution, hooks log their own sentence (serving_hook.py
  _handle_deprecated_args for --grpc-mode and --enable-flashinfer-allreduce-fusion).
"""

from __future__ import annotations

import argparse
import sys

# flag -> replacement named by DeprecatedStoreTrueAction(new_flag=...) in server_args.py
PARSE_TIME = {
    "--disable-cuda-graph": "--cuda-graph-backend-{decode,prefill}=disabled",
    "--enable-dp-attention": "--attn-dp-size <dp-size>",
}
GRPC_MODE = (
    "--grpc-mode is deprecated and will be removed in a future version. Use --smg-grpc-mode for "
    "the legacy SMG gRPC server, or --grpc-port for the native gRPC server."
)
ALLREDUCE_FUSION = (
    "--enable-flashinfer-allreduce-fusion is deprecated. "
    "Please use --flashinfer-allreduce-fusion-backend=auto instead."
)


def parse_time_lines(argv: list[str]) -> list[str]:
    """The lines SGLang's parser prints for deprecated flags in `argv` (one per occurrence)."""
    lines = []
    for token in argv:
        flag = token.split("=", 1)[0]
        if flag in PARSE_TIME:
            lines.append(
                f"\033[1;33m'{flag}' is deprecated and will be removed in a future release. "
                f"Use '{PARSE_TIME[flag]}' instead.\033[0m"
            )
    return lines


def print_parse_time_warnings(argv: list[str]) -> None:
    for line in parse_time_lines(argv):
        sys.stderr.write(line + "\n")
    sys.stderr.flush()


def resolve(args: argparse.Namespace) -> list[str]:
    """Translate deprecated settings into their successors in `args`, as SGLang's resolution
    hooks do; returns the warning lines they log."""
    lines: list[str] = []
    if getattr(args, "grpc_mode", False) and not getattr(args, "smg_grpc_mode", False):
        lines.append(GRPC_MODE)
        args.smg_grpc_mode = True
    if getattr(args, "enable_flashinfer_allreduce_fusion", False):
        lines.append(ALLREDUCE_FUSION)
    if getattr(args, "enable_dp_attention", False):
        # parallel_hook._handle_deprecated_dp_attention: dp-size becomes the attention-DP width.
        if int(getattr(args, "attn_dp_size", 1) or 1) == 1:
            args.attn_dp_size = int(getattr(args, "dp_size", 1) or 1)
            args.dp_size = 1
        args.enable_dp_attention = False
    if getattr(args, "disable_cuda_graph", False):
        # cuda_graph_hook: the legacy flag first, explicit per-phase backends win over it.
        for phase in ("decode", "prefill"):
            attr = f"cuda_graph_backend_{phase}"
            if getattr(args, attr, None) is None:
                setattr(args, attr, "disabled")
    return lines
