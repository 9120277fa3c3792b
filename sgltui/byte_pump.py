"""A socket and a pair of pipes joined, byte for byte, both ways (the standard library only):
`sgltui agent bridge`'s copy between ssh's stdin/stdout and the agent's socket."""

from __future__ import annotations

import os
import socket
import threading

CHUNK = 1 << 16


def _stdin_to_socket(sock: socket.socket, stdin_fd: int) -> None:
    try:
        while True:
            data = os.read(stdin_fd, CHUNK)
            if not data:
                break
            sock.sendall(data)
    except OSError:
        pass
    # The far side closed its end: let the agent see the end of the requests; its replies
    # still come back until it closes the connection.
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def pump(sock: socket.socket, stdin_fd: int = 0, stdout_fd: int = 1) -> None:
    """Copy stdin to the socket and the socket to stdout until the agent closes the connection
    (or stdout goes away). Two threads copy the two directions independently: one copy blocked
    on a full pipe (a client not reading pushes) never stops the other, so no deadlock between
    the agent's backpressure and ours."""
    t = threading.Thread(target=_stdin_to_socket, args=(sock, stdin_fd), daemon=True)
    t.start()
    try:
        while True:
            data = sock.recv(CHUNK)
            if not data:
                break
            view = memoryview(data)
            while view:
                n = os.write(stdout_fd, view)
                view = view[n:]
    except OSError:  # stdout closed (ssh went away) or the connection was reset
        pass
    finally:
        sock.close()
