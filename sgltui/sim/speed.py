"""How long each forward pass takes on the simulated GPU (a roofline model).

A decode step is bound by whichever is slower: streaming the weights plus every running
request's KV/state through HBM, or the FLOPs of the batch. Speculative decoding replaces one
target step by a verify over D tokens plus k draft steps and a draft extend, and commits an
accept length per request; at small batch that wins (memory-bound, verify ~ plain step), at large
batch verify costs ~D plain steps and the gain shrinks below 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from sgltui.sim.hardware import GpuPreset
from sgltui.sim.memory import MemoryPlan
from sgltui.sim.models import ModelSpec

ETA_BW = 0.8  # achieved fraction of HBM bandwidth on coalesced weight reads
MFU = 0.6  # achieved fraction of dense BF16 peak
T_OVERHEAD = 1.0e-3  # per target forward with CUDA graphs
T_DRAFT_OVERHEAD = 0.3e-3
PCIE_EFF = 0.8  # HiCache IO kernels reach ~80% of the measured link rate


@dataclass
class SpeedModel:
    gpu: GpuPreset
    model: ModelSpec
    plan: MemoryPlan
    tp: int = 1

    @property
    def _bw(self) -> float:
        return ETA_BW * self.gpu.hbm_bytes_s

    @property
    def _flops(self) -> float:
        return MFU * self.gpu.bf16_flops

    def target_step(self, batch: int, ctx_tokens: int, tokens_per_req: int = 1) -> float:
        """t(B) = max((W_read + sum bytes_i) / (eta BW), 2 N B T / (F MFU)) + t_oh."""
        if batch <= 0:
            return 0.0
        state = self.plan.state_bytes_per_slot
        bytes_ = self.model.read_bytes_per_step / self.tp + ctx_tokens * self.plan.kv_cell_bytes
        if state:
            bytes_ += batch * 2 * state
            if tokens_per_req > 1:
                bytes_ += batch * tokens_per_req * state  # verify writes D intermediate states
        flops = 2 * self.model.active_params / self.tp * batch * tokens_per_req
        return max(bytes_ / self._bw, flops / self._flops) + T_OVERHEAD

    def draft_step(self, batch: int, ctx_tokens: int, tokens_per_req: int = 1) -> float:
        spec = self.plan.spec
        if spec is None or batch <= 0:
            return 0.0
        draft_kv = ctx_tokens * (self.plan.kv_cell_eff_bytes - self.plan.kv_cell_bytes)
        bytes_ = spec.draft.read_bytes / self.tp + draft_kv
        flops = spec.draft.flops_per_token / self.tp * batch * tokens_per_req
        return max(bytes_ / self._bw, flops / self._flops) + T_DRAFT_OVERHEAD

    def decode_step(self, batch: int, ctx_tokens: int) -> float:
        """One decode iteration for `batch` running requests holding `ctx_tokens` KV in total."""
        spec = self.plan.spec
        if spec is None:
            return self.target_step(batch, ctx_tokens)
        verify = self.target_step(batch, ctx_tokens, spec.num_draft_tokens)
        drafts = spec.num_steps * self.draft_step(batch, ctx_tokens)
        extend = self.draft_step(batch, ctx_tokens, spec.num_steps + 1)
        return verify + drafts + extend

    def prefill(self, new_tokens: int, ctx_tokens: int) -> float:
        """One prefill forward over `new_tokens` whose attention spans `ctx_tokens` on average."""
        if new_tokens <= 0:
            return 0.0
        linear = 2 * self.model.active_params / self.tp * new_tokens
        # Quadratic part: only the full-attention layers, QK^T and PV.
        attn = (
            4
            * new_tokens
            * max(ctx_tokens, new_tokens)
            * self.model.num_heads
            * self.model.head_dim
            * self.model.full_attn_layers
            / self.tp
            / 2
        )
        compute = (linear + attn) / self._flops
        stream = self.model.read_bytes_per_step / self.tp / self._bw
        extra = 0.0
        if self.plan.spec is not None:  # the draft extends over the same tokens
            extra = self.draft_step(1, 0, new_tokens)
        return max(compute, stream) + T_OVERHEAD + extra

    def host_load(self, tokens: int, states: int = 0) -> float:
        """Host-to-device load-back of a HiCache hit (PCIe, overlapped only partially)."""
        bytes_ = tokens * self.plan.kv_cell_eff_bytes + states * self.plan.state_bytes_per_slot
        return bytes_ / (PCIE_EFF * self.gpu.pcie_bytes_s)

    def host_load_bytes(self, tokens: int, states: int = 0) -> float:
        return tokens * self.plan.kv_cell_eff_bytes + states * self.plan.state_bytes_per_slot
