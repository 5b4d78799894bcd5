"""A loopback TCP proxy with fault injection, for tools/chaos/chaos.py.

Each client process gets a link of its own: a listening socket on
127.0.0.1 with a port the OS picks, whose connections are forwarded to the
current server address (set_target: a restarted server may listen on a new
port; connections made after the change go there). Faults act on one link:

  drop(name)           closes every connection of the link at once, both
                       sides, as a cut cable or a dead switch port would (the
                       soft provider's queue pairs then fail and the clients
                       reconnect);
  stall(name, secs)    forwards nothing in either direction for `secs`,
                       then everything that was held, in order (a link that
                       stops delivering for a while: nothing is lost).

Why a proxy rather than the soft provider's own fault injection
(verbs::FaultOptions): the binaries have no flags for it, and a proxy cuts
and stalls the real sockets of unmodified binaries, on both directions of
every queue pair of a client, at times chosen by the chaos run.

One thread (owned: close() joins it) serves every link with a selector.
Only the Python standard library is used.
"""

import selectors
import socket
import threading
import time

BUFFER_BYTES = 1 << 16
SELECT_TIMEOUT_S = 0.02


class _Pair:
    """A client connection and its connection to the server."""

    def __init__(self, link, client, server):
        self.link = link
        self.client = client
        self.server = server
        # Bytes read from one side and not yet written to the other.
        self.to_server = bytearray()
        self.to_client = bytearray()
        self.closed = False
        # The selector events each socket is registered for (0: none).
        self.events = {"client": selectors.EVENT_READ, "server": selectors.EVENT_READ}


class _Link:
    def __init__(self, name, listener):
        self.name = name
        self.listener = listener
        self.port = listener.getsockname()[1]
        self.pairs = set()
        self.stalled_until = 0.0
        self.connections = 0
        self.drops = 0
        self.stalls = 0


class FaultProxy:
    """Links by name; every method is thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._links = {}
        self._target = None
        self._selector = selectors.DefaultSelector()
        self._stop = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, ("wake", None))
        self._thread = threading.Thread(target=self._run, name="chaos-proxy")
        self._thread.start()

    # -- control -----------------------------------------------------------

    def add_link(self, name):
        """Opens link `name`; returns its port on 127.0.0.1."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        listener.setblocking(False)
        link = _Link(name, listener)
        with self._lock:
            self._links[name] = link
            self._selector.register(listener, selectors.EVENT_READ, ("accept", link))
        self._wake()
        return link.port

    def set_target(self, host, port):
        with self._lock:
            self._target = (host, port)

    def drop(self, name):
        with self._lock:
            link = self._links[name]
            link.drops += 1
            pairs = list(link.pairs)
        for pair in pairs:
            self._close_pair(pair)
        return len(pairs)

    def stall(self, name, seconds):
        with self._lock:
            link = self._links[name]
            link.stalls += 1
            link.stalled_until = max(link.stalled_until, time.monotonic() + seconds)
        self._wake()

    def counts(self, name):
        with self._lock:
            link = self._links[name]
            return {"connections": link.connections, "drops": link.drops, "stalls": link.stalls}

    def close(self):
        with self._lock:
            self._stop = True
        self._wake()
        self._thread.join()
        with self._lock:
            links = list(self._links.values())
        for link in links:
            for pair in list(link.pairs):
                self._close_pair(pair)
            link.listener.close()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    # -- the proxy thread --------------------------------------------------

    def _wake(self):
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def _close_pair(self, pair):
        with self._lock:
            if pair.closed:
                return
            pair.closed = True
            pair.link.pairs.discard(pair)
            for s in (pair.client, pair.server):
                try:
                    self._selector.unregister(s)
                except (KeyError, ValueError):
                    pass
        for s in (pair.client, pair.server):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _accept(self, link):
        try:
            client, _ = link.listener.accept()
        except (BlockingIOError, OSError):
            return
        with self._lock:
            target = self._target
        if target is None:
            client.close()
            return
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.settimeout(2.0)
        try:
            server.connect(target)
        except OSError:
            # No server listening (it is restarting): the client sees a
            # refused connection and retries, as without a proxy.
            server.close()
            client.close()
            return
        for s in (client, server):
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pair = _Pair(link, client, server)
        with self._lock:
            link.connections += 1
            link.pairs.add(pair)
            self._selector.register(client, selectors.EVENT_READ, ("client", pair))
            self._selector.register(server, selectors.EVENT_READ, ("server", pair))

    def _interest(self, pair, stalled):
        """Reads only while the outgoing buffer is short and the link is
        not stalled; writes while there is something to write."""
        for sock, out_buf, in_buf, role in (
                (pair.client, pair.to_client, pair.to_server, "client"),
                (pair.server, pair.to_server, pair.to_client, "server")):
            events = 0
            if not stalled and len(in_buf) < BUFFER_BYTES:
                events |= selectors.EVENT_READ
            if not stalled and out_buf:
                events |= selectors.EVENT_WRITE
            if events == pair.events[role]:
                continue
            try:
                if not events:
                    self._selector.unregister(sock)
                elif pair.events[role]:
                    self._selector.modify(sock, events, (role, pair))
                else:
                    self._selector.register(sock, events, (role, pair))
                pair.events[role] = events
            except (KeyError, ValueError, OSError):
                pass

    def _serve(self, role, pair, mask):
        src, dst = (pair.client, pair.server) if role == "client" else (pair.server, pair.client)
        in_buf = pair.to_server if role == "client" else pair.to_client
        out_buf = pair.to_client if role == "client" else pair.to_server
        if mask & selectors.EVENT_READ:
            try:
                data = src.recv(BUFFER_BYTES)
            except BlockingIOError:
                data = None
            except OSError:
                data = b""
            if data == b"":
                # Flush what is held, then close both: the peer sees the
                # close as it would see the other side's.
                if in_buf:
                    try:
                        dst.setblocking(True)
                        dst.settimeout(1.0)
                        dst.sendall(bytes(in_buf))
                    except OSError:
                        pass
                self._close_pair(pair)
                return
            if data:
                in_buf.extend(data)
                if not pair.link.stalled_until > time.monotonic():
                    try:  # forward at once; the rest when dst is writable
                        n = dst.send(in_buf)
                        del in_buf[:n]
                    except BlockingIOError:
                        pass
                    except OSError:
                        self._close_pair(pair)
                        return
        if mask & selectors.EVENT_WRITE and out_buf:
            try:
                n = src.send(out_buf)
                del out_buf[:n]
            except BlockingIOError:
                pass
            except OSError:
                self._close_pair(pair)
                return

    def _run(self):
        while True:
            with self._lock:
                if self._stop:
                    return
                now = time.monotonic()
                pairs = [(p, p.link.stalled_until > now)
                         for link in self._links.values() for p in link.pairs]
            for pair, stalled in pairs:
                if not pair.closed:
                    self._interest(pair, stalled)
            for key, mask in self._selector.select(SELECT_TIMEOUT_S):
                kind, obj = key.data
                if kind == "wake":
                    try:
                        self._wake_r.recv(4096)
                    except OSError:
                        pass
                elif kind == "accept":
                    self._accept(obj)
                elif not obj.closed:
                    self._serve(kind, obj, mask)
