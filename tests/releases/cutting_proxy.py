"""A TCP proxy on loopback that cuts an S3 upload mid-body: the network fault of a crash mid-upload.

The store under test talks to the proxy; the proxy forwards to the real S3 server (moto) and, on
a request line naming a chosen key, forwards the headers and part of the body, then closes both
connections, as a client that died mid-upload would leave the server."""
from __future__ import annotations

import socket
import threading


class CuttingProxy:
    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.removeprefix("http://").partition(":")
        self.upstream = (host, int(port))
        self.cut_marker: bytes | None = None  # request-line fragment whose upload is cut
        self.cuts = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = False
        self._threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream)
            for args in ((client, upstream, True), (upstream, client, False)):
                t = threading.Thread(target=self._pump, args=args, daemon=True)
                t.start()
                self._threads.append(t)

    def _pump(self, src: socket.socket, dst: socket.socket, inspect: bool) -> None:
        try:
            while data := src.recv(65536):
                marker = self.cut_marker
                at = data.find(b"PUT ") if inspect and marker else -1
                if at >= 0 and marker in data[at:data.find(b"\r\n", at)]:
                    head_end = data.find(b"\r\n\r\n", at)
                    body = data[head_end + 4:] if head_end >= 0 else b""
                    # the headers (Content-Length promises the whole body) and half of the body seen
                    dst.sendall(data[:head_end + 4 + len(body) // 2] if head_end >= 0 else data)
                    self.cuts += 1
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self._stop = True
        self._listener.close()
