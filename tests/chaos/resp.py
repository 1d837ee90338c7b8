"""A minimal Redis client (RESP2), enough for the harness: one command or a
MULTI/EXEC batch at a time, with a deadline on every reply."""
import socket


class RedisError(Exception):
    pass


class Redis:
    def __init__(self, host, port, timeout=1.0):
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.f = self.s.makefile("rb")

    def close(self):
        try:
            self.f.close()
            self.s.close()
        except OSError:
            pass

    def _send(self, cmds):
        out = []
        for args in cmds:
            out.append(b"*%d\r\n" % len(args))
            for a in args:
                a = a if isinstance(a, bytes) else str(a).encode()
                out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))

    def _read(self):
        line = self.f.readline()
        if not line:
            raise ConnectionError("connection closed")
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return RedisError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2].decode(errors="replace")
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise ConnectionError("bad reply %r" % line)

    def cmd(self, *args):
        self._send([args])
        r = self._read()
        if isinstance(r, RedisError):
            raise r
        return r

    def multi(self, cmds):
        """Runs cmds in one MULTI/EXEC: one snapshot of the server."""
        self._send([("MULTI",)] + list(cmds) + [("EXEC",)])
        for _ in range(len(cmds) + 1):
            r = self._read()
            if isinstance(r, RedisError):
                raise r
        r = self._read()
        if not isinstance(r, list):
            raise RedisError("EXEC: %r" % (r,))
        return r


def master_of(sentinels, name, timeout=0.5):
    """The master the first Sentinel that answers names: (host, port)."""
    for host, port in sentinels:
        try:
            r = Redis(host, port, timeout)
            try:
                a = r.cmd("SENTINEL", "get-master-addr-by-name", name)
            finally:
                r.close()
            if a:
                return a[0], int(a[1])
        except (OSError, RedisError, ConnectionError):
            continue
    return None
