"""Lifecycle commands and the swap: the operations (the only sequencing of start, stop,
restart and swap), a swap's steps as the session tells them, preflight, and the standbys
(servers asleep beside a slot, their memory and room) with the warm swap that wakes one."""
