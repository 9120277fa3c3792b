"""Prefix (radix) cache with an optional host tier, at block granularity.

Blocks are keyed by a hash chained over the token ids, so two prompts share cache entries exactly
as far as they share a prefix. The device tier lives inside the KV pool (evictable unless a
running request locks it); with HiCache, write-through copies every inserted block to the host
tier, so a device eviction keeps the host copy and a later hit loads it back over PCIe
(sglang/srt/mem_cache/hiradix_cache.py). Sizes are in tokens.
"""

from __future__ import annotations

from collections import OrderedDict

BLOCK = 16


def block_keys(ids) -> list[int]:
    keys = []
    h = 0x9E3779B97F4A7C15
    for start in range(0, len(ids) - BLOCK + 1, BLOCK):
        h = hash((h, tuple(ids[start : start + BLOCK])))
        keys.append(h)
    return keys


class PrefixCache:
    def __init__(self, enabled: bool, host_capacity_tokens: int = 0, host_state_capacity: int = 0):
        self.enabled = enabled
        self.host_capacity = host_capacity_tokens
        # Hybrid models: the host mamba pool keeps one state per cached sequence end (the node a
        # later request resumes from), LRU like the host KV blocks (pool_host/mamba.py).
        self.host_state_capacity = host_state_capacity
        self.host_states: OrderedDict[int, None] = OrderedDict()
        self.device: OrderedDict[int, int] = OrderedDict()  # key -> lock count
        self.host: OrderedDict[int, None] = OrderedDict()
        self.backup_tokens = 0  # device->host copies since start (write-through)
        self.evicted_tokens = 0
        self._locked_blocks = 0  # device blocks with a lock count > 0 (keeps evictable O(1))

    @property
    def device_tokens(self) -> int:
        return len(self.device) * BLOCK

    @property
    def host_tokens(self) -> int:
        return len(self.host) * BLOCK

    def evictable_tokens(self) -> int:
        return (len(self.device) - self._locked_blocks) * BLOCK

    def match(self, keys: list[int]) -> tuple[int, int]:
        """(device-hit blocks, host-only-hit blocks) of the longest cached prefix."""
        if not self.enabled:
            return 0, 0
        dev = host = 0
        for k in keys:
            if host == 0 and k in self.device:
                dev += 1
            elif k in self.host:
                host += 1
            else:
                break
        return dev, host

    def lock(self, keys: list[int]) -> None:
        for k in keys:
            if k in self.device:
                if self.device[k] == 0:
                    self._locked_blocks += 1
                self.device[k] += 1
                self.device.move_to_end(k)

    def unlock(self, keys: list[int]) -> None:
        for k in keys:
            if k in self.device and self.device[k] > 0:
                self.device[k] -= 1
                if self.device[k] == 0:
                    self._locked_blocks -= 1

    def load_back(self, keys: list[int]) -> None:
        """Host-hit blocks become device blocks (the caller has made room), locked by the request."""
        for k in keys:
            if self.device.get(k, 0) == 0:
                self._locked_blocks += 1
            self.device[k] = self.device.get(k, 0) + 1
            self.host.move_to_end(k)

    def insert(self, keys: list[int]) -> int:
        """Add a finished request's blocks; returns how many tokens were new to the device tier."""
        if not self.enabled:
            return 0
        new = 0
        for k in keys:
            if k in self.device:
                self.device.move_to_end(k)
            else:
                self.device[k] = 0
                new += BLOCK
            if self.host_capacity:
                if k not in self.host:
                    self.backup_tokens += BLOCK
                    self.host[k] = None
                self.host.move_to_end(k)
        while self.host_capacity and len(self.host) * BLOCK > self.host_capacity:
            dropped, _ = self.host.popitem(last=False)
            self.host_states.pop(dropped, None)
        if self.host_state_capacity and keys and keys[-1] in self.host:
            self.host_states[keys[-1]] = None
            self.host_states.move_to_end(keys[-1])
            while len(self.host_states) > self.host_state_capacity:
                self.host_states.popitem(last=False)
        return new

    def evict(self, tokens: int) -> int:
        """Free at least `tokens` device tokens from unlocked blocks, oldest first."""
        victims: list[int] = []
        for k, c in self.device.items():
            if len(victims) * BLOCK >= tokens:
                break
            if c == 0:
                victims.append(k)
        for k in victims:
            del self.device[k]
        freed = len(victims) * BLOCK
        self.evicted_tokens += freed
        return freed

    def clear(self) -> None:
        self.device = OrderedDict((k, c) for k, c in self.device.items() if c > 0)
        self._locked_blocks = len(self.device)
        self.host.clear()
        self.host_states.clear()
