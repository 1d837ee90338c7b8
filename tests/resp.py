# The Redis protocol (RESP2) as the tests speak it, the one module of it:
# a client (Redis: one command, or a MULTI/EXEC batch, with a deadline on
# every reply), and for the tests' fake servers commands in, replies out,
# and what they print, a line at a time. tests/chaos/ imports it too.
import socket
import sys
import threading

_out = threading.Lock()


def say(line):
    """One line of output, whole and flushed, whichever thread says it (a
    print() writes the line and its newline apart: two threads' lines can
    run together, and a test's grep for the start of a line miss it)."""
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def bulk(s):
    b = s if isinstance(s, bytes) else str(s).encode()
    return b"$%d\r\n%s\r\n" % (len(b), b)


def encode(args):
    """A command (strings, bytes or numbers) as Redis reads it."""
    return b"*%d\r\n" % len(args) + b"".join(bulk(a) for a in args)


def commands(f):
    """Each command read from the file f, as a list of strings, until the
    connection ends: also in the middle of a command (a client that gives
    up on a connection may drop it with a command half sent)."""
    while True:
        line = f.readline()
        if not line:
            return
        if not line.startswith(b"*"):
            continue
        args = []
        for _ in range(int(line[1:])):
            head = f.readline()
            if not head.endswith(b"\n"):
                return
            size = int(head[1:])
            arg = f.read(size + 2)
            if len(arg) < size + 2:
                return
            args.append(arg[:-2].decode(errors="replace"))
        yield args


def raw_reply(f):
    """One whole reply read from the file f, its bytes as they came."""
    line = f.readline()
    if not line:
        raise ConnectionError("connection closed")
    t = line[:1]
    if t in (b"+", b"-", b":"):
        return line
    if t == b"$":
        size = int(line[1:])
        return line if size < 0 else line + f.read(size + 2)
    if t == b"*":
        count = int(line[1:])
        return line + b"".join(raw_reply(f) for _ in range(max(count, 0)))
    raise ConnectionError("bad reply %r" % line)


class Error(str):
    """An error reply, as a value: compared as its text."""


class RedisError(Exception):
    pass


def read_reply(f):
    """One reply read from the file f: str, int, None, a list, or Error."""
    line = f.readline()
    if not line:
        raise ConnectionError("connection closed")
    t, rest = line[:1], line[1:-2]
    if t == b"+":
        return rest.decode()
    if t == b"-":
        return Error(rest.decode())
    if t == b":":
        return int(rest)
    if t == b"$":
        n = int(rest)
        if n < 0:
            return None
        return f.read(n + 2)[:-2].decode(errors="replace")
    if t == b"*":
        n = int(rest)
        return None if n < 0 else [read_reply(f) for _ in range(n)]
    raise ConnectionError("bad reply %r" % line)


class Redis:
    """A client of a Redis at (host, port), or at the unix socket path when
    port is None."""

    def __init__(self, host, port=None, timeout=1.0):
        if port is None:
            self.s = socket.socket(socket.AF_UNIX)
            self.s.settimeout(timeout)
            self.s.connect(host)
        else:
            self.s = socket.create_connection((host, port), timeout=timeout)
        self.f = self.s.makefile("rb")

    def close(self):
        try:
            self.f.close()
            self.s.close()
        except OSError:
            pass

    def send(self, *args):
        self.s.sendall(encode(args))

    def read(self):
        return read_reply(self.f)

    def call(self, *args):
        """The reply, an error reply as an Error value."""
        self.send(*args)
        return self.read()

    def cmd(self, *args):
        """The reply; an error reply raises RedisError."""
        r = self.call(*args)
        if isinstance(r, Error):
            raise RedisError(r)
        return r

    def multi(self, cmds):
        """Runs cmds in one MULTI/EXEC: one snapshot of the server."""
        self.s.sendall(b"".join(encode(c) for c in [("MULTI",)] + list(cmds) + [("EXEC",)]))
        for _ in range(len(cmds) + 1):
            r = self.read()
            if isinstance(r, Error):
                raise RedisError(r)
        r = self.read()
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
        except (OSError, RedisError):
            continue
    return None
