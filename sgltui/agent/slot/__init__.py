"""One server slot: its state and the lifecycle table, the server's processes (spawn, the
log relay, the process tree), the launch's checks and progress, liveness and restarts, the
profile it runs as resolved, and servers sgltui did not start (discovery, attach) or finds
again (recover)."""
