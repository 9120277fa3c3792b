"""Pools: a slot's front (a port stable across swaps), host.toml's pools behind smg's
gateway (its launch, client keys, workers, what it routes reconciled) and pools across hosts
(a remote pool's gateway here, a slot exposed to another host's gateway)."""
