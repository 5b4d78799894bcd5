"""tools/chaos/chaos_proxy.py: forwards both ways to the current target, drops a
link's connections and stalls a link without losing bytes."""

import socket
import threading
import time
import unittest

from tools.chaos import chaos_proxy

TIMEOUT_S = 10.0
STALL_S = 0.5


class EchoServer:
    """Echoes every connection on 127.0.0.1 (port chosen by the OS)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn):
        with conn:
            while True:
                try:
                    data = conn.recv(4096)
                except OSError:
                    return
                if not data:
                    return
                conn.sendall(data)

    def close(self):
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join()


def recv_exactly(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


class FaultProxyTest(unittest.TestCase):

    def setUp(self):
        self.echo = EchoServer()
        self.proxy = chaos_proxy.FaultProxy()
        self.proxy.set_target("127.0.0.1", self.echo.port)
        self.port = self.proxy.add_link("a")

    def tearDown(self):
        self.proxy.close()
        self.echo.close()

    def connect(self):
        return socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT_S)

    def test_forwards_both_ways(self):
        with self.connect() as c:
            payload = bytes(range(256)) * 1000
            c.sendall(payload)
            self.assertEqual(recv_exactly(c, len(payload)), payload)
        self.assertEqual(self.proxy.counts("a")["connections"], 1)

    def test_drop_closes_the_links_connections(self):
        with self.connect() as c:
            c.sendall(b"x")
            self.assertEqual(recv_exactly(c, 1), b"x")
            self.assertEqual(self.proxy.drop("a"), 1)
            self.assertEqual(c.recv(1), b"")  # closed by the proxy
        with self.connect() as c:  # a new connection goes through again
            c.sendall(b"y")
            self.assertEqual(recv_exactly(c, 1), b"y")

    def test_stall_holds_the_bytes_then_delivers_them_in_order(self):
        with self.connect() as c:
            c.sendall(b"a")
            self.assertEqual(recv_exactly(c, 1), b"a")
            self.proxy.stall("a", STALL_S)
            start = time.monotonic()
            c.sendall(b"bcd")
            self.assertEqual(recv_exactly(c, 3), b"bcd")
            self.assertGreaterEqual(time.monotonic() - start, STALL_S * 0.9)


if __name__ == "__main__":
    unittest.main()
