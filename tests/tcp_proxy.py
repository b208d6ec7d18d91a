"""A loopback TCP proxy a test controls, to cut a client's connection to a server at a chosen moment
(issue 52: a network fault on the lake's PostgreSQL catalog).

`TcpProxy(port).start()` listens on its own loopback port and forwards every connection to
`127.0.0.1:port`. `cut_at(marker, nth, forward)` arms it: the `nth` time a client sends bytes that
hold `marker` (b"COMMIT"), every connection is closed, with those bytes forwarded first
(`forward=True`: the server commits and its answer is lost) or not (the server never sees the
commit). While `down()` holds, new connections are closed at once; `up()` restores service.
"""

from __future__ import annotations

import socket
import threading
import time


class TcpProxy:
    def __init__(self, target_port: int, host: str = "127.0.0.1"):
        self.target = (host, target_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._serving = True
        self._marker: bytes | None = None
        self._nth = 0
        self._forward = False
        self._mute = False  # answers from the server are dropped (the cut is under way)
        self.seen = 0  # times the marker was sent
        self.cut_done = threading.Event()

    def start(self) -> TcpProxy:
        self._listener.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def cut_at(self, marker: bytes, nth: int, forward: bool) -> None:
        with self._lock:
            self._marker, self._nth, self._forward, self.seen = marker, nth, forward, 0
            self.cut_done.clear()

    def down(self) -> None:
        with self._lock:
            self._serving = False
        self._close_all()

    def up(self) -> None:
        with self._lock:
            self._serving, self._mute = True, False

    def stop(self) -> None:
        self.down()
        self._listener.close()

    def _close_all(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                serving = self._serving
            if not serving:
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, server]
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, upstream: bool) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            cut = False
            if upstream:
                with self._lock:
                    if self._marker is not None and self._marker in data:
                        self.seen += 1
                        if self.seen == self._nth:
                            cut, self._marker = True, None
                            forward = self._forward
                            self._serving, self._mute = False, True
            if cut:
                if forward:
                    try:
                        dst.sendall(data)
                    except OSError:
                        pass
                    time.sleep(0.5)  # the server commits; its answer goes nowhere
                self._close_all()
                self.cut_done.set()
                return
            if not upstream:
                with self._lock:
                    if self._mute:
                        continue
            try:
                dst.sendall(data)
            except OSError:
                break
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
