"""The stand-in hosts' `ssh` (tests/support/standin.py): stdlib only, started by fleet.toml's
[ssh] command for each host as ssh would be (`... DEST -- 'sgltui agent bridge'`).

`standin:NAME` connects to the stand-in server ($SGLTUI_STANDIN_SOCKET), says NAME on a first
line, then copies bytes both ways until either side closes; `dead:NAME` is ssh's refusal
(exit 255 at once); `slow:NAME` is a host that never answers (it ends when it is killed or its stdin closes)."""

import os
import selectors
import socket
import sys


def main() -> int:
    argv = sys.argv[1:]
    dest = argv[argv.index("--") - 1] if "--" in argv else argv[-1]
    kind, _, name = dest.partition(":")
    if kind == "dead":
        sys.stderr.write(f"ssh: connect to host {name} port 22: Connection refused\n")
        return 255
    if kind == "slow":  # never answers; ends when its parent goes (stdin closes), as ssh does
        while os.read(0, 65536):
            pass
        return 255
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(os.environ["SGLTUI_STANDIN_SOCKET"])
    except (KeyError, OSError) as exc:
        sys.stderr.write(f"ssh: connect to host {name} port 22: Connection refused ({exc})\n")
        return 255
    sock.sendall(name.encode() + b"\n")
    sel = selectors.DefaultSelector()
    sel.register(0, selectors.EVENT_READ)
    sel.register(sock, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            if key.fileobj == 0:
                data = os.read(0, 65536)
                if not data:
                    sock.shutdown(socket.SHUT_WR)
                    sel.unregister(0)
                    continue
                sock.sendall(data)
            else:
                data = sock.recv(65536)
                if not data:
                    return 0
                view = memoryview(data)
                while view:
                    view = view[os.write(1, view) :]


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BrokenPipeError, KeyboardInterrupt):
        sys.exit(0)
