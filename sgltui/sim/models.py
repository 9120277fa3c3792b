"""Model presets picked from --model-path, or read from a local directory's config.json.

Only the shape matters to the simulator: layer counts and head sizes set the KV and state bytes
per token/request, weight bytes set load time and the bytes streamed per decode step, and the
draft description sets speculative memory and accept lengths.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path


class ModelNotFound(Exception):
    """--model-path is neither a known preset, a local folder, nor a name with a size in it."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    architectures: tuple[str, ...]
    model_type: str
    num_layers: int  # decoder layers of the target
    full_attn_layers: int  # layers that keep KV (all of them for a dense model)
    hidden: int
    num_heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    context_length: int
    weights_bytes: float  # checkpoint bytes loaded onto the GPU (BF16)
    active_params: float  # parameters touched per token (FLOPs = 2 x this)
    # Hybrid linear-attention (GDN) layers; 0 for dense models.
    linear_layers: int = 0
    lin_k_heads: int = 0
    lin_v_heads: int = 0
    lin_k_dim: int = 0
    lin_v_dim: int = 0
    conv_kernel: int = 4
    # Multimodal checkpoints get SGLang's extra MFS factor: x 0.95 x clamp(1 - 0.1 (c - 1), 0.8, 1.05).
    vit_layers: int = 0
    vit_hidden: int = 0
    # Built-in MTP head (NEXTN) and what one draft layer weighs.
    mtp_layers: int = 0
    mtp_bytes: float = 0.0
    # Per-position cumulative acceptance of a draft chain: P(draft token j accepted).
    accept_chain: tuple[float, ...] = (0.8, 0.6, 0.45, 0.33, 0.24, 0.17, 0.12)
    spec_default: tuple[int, int, int] = (3, 1, 4)  # steps, topk, draft tokens when none given
    stop_mean_tokens: int = 400  # typical answer length when EOS is not ignored

    @property
    def is_hybrid(self) -> bool:
        return self.linear_layers > 0

    @property
    def is_multimodal(self) -> bool:
        return self.vit_layers > 0

    def kv_bytes_per_token(self, tp: int = 1, dtype_bytes: int = 2) -> int:
        """cell_size: (kv_heads / tp) x (head_dim + v_head_dim) x L_kv x dtype bytes."""
        heads = max(1, self.kv_heads // tp)
        return heads * (2 * self.head_dim) * self.full_attn_layers * dtype_bytes

    def state_bytes_per_slot(self, tp: int = 1, ssm_bytes: int = 4) -> int:
        """S_b = L_lin x [conv_dim x (k_conv - 1) x 2 + HV x dk x dv x ssm_bytes] (GDN)."""
        if not self.is_hybrid:
            return 0
        conv_dim = (2 * self.lin_k_heads * self.lin_k_dim + self.lin_v_heads * self.lin_v_dim) // tp
        ssm = (self.lin_v_heads // tp) * self.lin_k_dim * self.lin_v_dim * ssm_bytes
        return self.linear_layers * (conv_dim * (self.conv_kernel - 1) * 2 + ssm)

    @property
    def embed_bytes(self) -> float:
        """The BF16 embedding table: loaded with the weights but not streamed per decode step."""
        return float(self.vocab * self.hidden * 2)

    @property
    def read_bytes_per_step(self) -> float:
        """Weights streamed per decode step: everything but the embedding lookup table."""
        return self.weights_bytes - self.embed_bytes


@dataclass(frozen=True)
class DraftSpec:
    """The draft side of speculative decoding."""

    kind: str  # "mtp" (in the target checkpoint), "eagle" (small head), "model" (STANDALONE)
    weights_bytes: float
    layers: int  # attention layers that keep draft KV
    read_bytes: float  # bytes streamed per draft step (head + the lm_head it uses)
    flops_per_token: float


_QWEN36_27B = ModelSpec(
    name="Qwen/Qwen3.6-27B",
    architectures=("Qwen3_5ForConditionalGeneration",),
    model_type="qwen3_5",
    num_layers=64,
    full_attn_layers=16,
    hidden=5120,
    num_heads=24,
    kv_heads=4,
    head_dim=256,
    vocab=248320,
    context_length=262144,
    weights_bytes=55.6e9,
    active_params=27e9,
    linear_layers=48,
    lin_k_heads=16,
    lin_v_heads=48,
    lin_k_dim=128,
    lin_v_dim=128,
    conv_kernel=4,
    vit_layers=27,
    vit_hidden=1152,
    mtp_layers=1,
    mtp_bytes=0.85e9,
    accept_chain=(0.96, 0.80, 0.64, 0.5, 0.38, 0.28, 0.2),
)

_QWEN3_32B = ModelSpec(
    name="Qwen/Qwen3-32B",
    architectures=("Qwen3ForCausalLM",),
    model_type="qwen3",
    num_layers=64,
    full_attn_layers=64,
    hidden=5120,
    num_heads=64,
    kv_heads=8,
    head_dim=128,
    vocab=151936,
    context_length=40960,
    weights_bytes=65.5e9,
    active_params=32.8e9,
)

_LLAMA31_8B = ModelSpec(
    name="meta-llama/Llama-3.1-8B-Instruct",
    architectures=("LlamaForCausalLM",),
    model_type="llama",
    num_layers=32,
    full_attn_layers=32,
    hidden=4096,
    num_heads=32,
    kv_heads=8,
    head_dim=128,
    vocab=128256,
    context_length=131072,
    weights_bytes=16.06e9,
    active_params=8.03e9,
    accept_chain=(0.88, 0.74, 0.6, 0.47, 0.36, 0.27, 0.2),
    spec_default=(5, 4, 8),
)

# Matched as case-insensitive substrings of the model path's last components.
MODEL_PRESETS: dict[str, ModelSpec] = {
    "qwen3.6-27b": _QWEN36_27B,
    "qwen3.5-27b": replace(_QWEN36_27B, name="Qwen/Qwen3.5-27B"),
    "qwen3-32b": _QWEN3_32B,
    "llama-3.1-8b": _LLAMA31_8B,
    "llama3.1-8b": _LLAMA31_8B,
}


def _match_preset(path: str) -> ModelSpec | None:
    low = path.lower().rstrip("/")
    for key, spec in MODEL_PRESETS.items():
        if key in low:
            return replace(spec, name=path)
    return None


def _dense_from_size(path: str, billions: float) -> ModelSpec:
    """A plausible dense decoder for a name like 'acme/foo-14B': Llama-like proportions."""
    hidden = 4096 if billions <= 10 else (5120 if billions <= 40 else 8192)
    layers = max(8, round(billions * 1e9 / (12.5 * hidden * hidden)))
    vocab = 128256
    return ModelSpec(
        name=path,
        architectures=("LlamaForCausalLM",),
        model_type="llama",
        num_layers=layers,
        full_attn_layers=layers,
        hidden=hidden,
        num_heads=hidden // 128,
        kv_heads=8,
        head_dim=128,
        vocab=vocab,
        context_length=131072,
        weights_bytes=billions * 1e9 * 2,
        active_params=billions * 1e9,
    )


def _from_config(path: Path) -> ModelSpec:
    cfg = json.loads((path / "config.json").read_text())
    text = cfg.get("text_config") or cfg
    hidden = int(text.get("hidden_size", 4096))
    layers = int(text.get("num_hidden_layers", 32))
    heads = int(text.get("num_attention_heads", max(1, hidden // 128)))
    kv_heads = int(text.get("num_key_value_heads", heads))
    head_dim = int(text.get("head_dim") or hidden // heads)
    vocab = int(text.get("vocab_size", 32000))
    inter = int(text.get("intermediate_size", 4 * hidden))
    ctx = int(text.get("max_position_embeddings", 4096))
    layer_types = text.get("layer_types") or []
    if layer_types:
        full = sum(1 for t in layer_types if "full" in str(t) or t == "attention")
    elif text.get("full_attention_interval"):
        full = layers // int(text["full_attention_interval"])
    else:
        full = layers
    linear = layers - full
    attn = hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + heads * head_dim * hidden
    per_layer = attn + 3 * hidden * inter
    embed = vocab * hidden
    tied = bool(cfg.get("tie_word_embeddings", False))
    params = layers * per_layer + embed * (1 if tied else 2)
    vision = cfg.get("vision_config") or {}
    return ModelSpec(
        name=str(path),
        architectures=tuple(cfg.get("architectures") or ["LlamaForCausalLM"]),
        model_type=str(cfg.get("model_type", "llama")),
        num_layers=layers,
        full_attn_layers=full,
        hidden=hidden,
        num_heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        vocab=vocab,
        context_length=ctx,
        weights_bytes=params * 2,
        active_params=params - embed,
        linear_layers=linear,
        lin_k_heads=int(text.get("linear_num_key_heads", 16)) if linear else 0,
        lin_v_heads=int(text.get("linear_num_value_heads", 32)) if linear else 0,
        lin_k_dim=int(text.get("linear_key_head_dim", 128)) if linear else 0,
        lin_v_dim=int(text.get("linear_value_head_dim", 128)) if linear else 0,
        conv_kernel=int(text.get("linear_conv_kernel_dim", 4)),
        vit_layers=int(vision.get("depth", vision.get("num_hidden_layers", 0)) or 0),
        vit_hidden=int(vision.get("hidden_size", 0) or 0),
        mtp_layers=int(
            text.get("mtp_num_hidden_layers", text.get("num_nextn_predict_layers", 0)) or 0
        ),
        mtp_bytes=per_layer * 2.0,
    )


_SIZE_RE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)[bB](?![a-zA-Z])")


def resolve_model(model_path: str) -> ModelSpec:
    """Preset by name, else a local folder's config.json, else a size parsed from the name."""
    local = Path(model_path).expanduser()
    if local.is_dir() and (local / "config.json").is_file():
        return _from_config(local)
    preset = _match_preset(model_path)
    if preset is not None:
        return preset
    m = _SIZE_RE.search(Path(model_path).name or model_path)
    if m and not local.exists():
        return _dense_from_size(model_path, float(m.group(1)))
    raise ModelNotFound(model_path)


def resolve_draft(algorithm: str, target: ModelSpec, draft_path: str | None) -> DraftSpec:
    """Draft weights/layers for the speculative algorithm (what its memory sizing counts)."""
    algo = algorithm.upper()
    lm_head = target.vocab * target.hidden * 2
    if algo == "STANDALONE" and draft_path:
        d = resolve_model(draft_path)
        return DraftSpec(
            "model", d.weights_bytes, d.full_attn_layers, d.read_bytes_per_step, 2 * d.active_params
        )
    if algo in ("EAGLE", "EAGLE3") and draft_path and "eagle" in draft_path.lower():
        # An EAGLE head: one decoder layer, a fusion fc and a reduced-vocab lm_head (~2.2 GB
        # logged for the Llama-3.1-8B EAGLE-3 head).
        w = 2.2e9 * (target.hidden / 4096) ** 2
        return DraftSpec("eagle", w, 1, w, 2 * w / 2)
    # NEXTN / EAGLE on a checkpoint with MTP layers: one decoder layer sharing the target's
    # embeddings and lm_head, so each draft step also streams the lm_head.
    layer = target.mtp_bytes or target.read_bytes_per_step / max(1, target.num_layers)
    return DraftSpec("mtp", layer, 1, layer + lm_head, 2 * (layer / 2 + lm_head / 2))


def vit_mfs_factor(model: ModelSpec) -> float:
    """MFS x 0.95 x clamp(1 - 0.1 x (c - 1), 0.8, 1.05), c = vit_layers x vit_hidden^2 / (24 x 1024^2)."""
    if not model.is_multimodal:
        return 1.0
    c = model.vit_layers * model.vit_hidden**2 / (24 * 1024**2)
    return 0.95 * min(1.05, max(0.8, 1 - 0.1 * (c - 1)))


__all__ = [
    "ModelSpec",
    "DraftSpec",
    "ModelNotFound",
    "MODEL_PRESETS",
    "resolve_model",
    "resolve_draft",
    "vit_mfs_factor",
]
