"""Telemetry: GPU (NVML or simulated), host (psutil), engine metrics, capacity card, one timeline."""

from sgltui.agent.telemetry.telemetry import Telemetry

__all__ = ["Telemetry"]
