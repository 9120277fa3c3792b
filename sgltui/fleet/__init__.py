"""Several hosts: fleet.toml, one agent client per host over `ssh HOST sgltui agent bridge`,
`host/slot` addressing and the merged view (imports core, protocol and the agent client)."""
