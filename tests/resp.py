# The Redis protocol as the tests' fake servers speak it: commands in
# (arrays of bulk strings), replies out; and what they print, a line at a
# time.
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
    b = s.encode()
    return b"$%d\r\n%s\r\n" % (len(b), b)


def commands(f):
    """Each command read from the file f, as a list of strings."""
    while True:
        line = f.readline()
        if not line:
            return
        if not line.startswith(b"*"):
            continue
        args = []
        for _ in range(int(line[1:])):
            size = int(f.readline()[1:])
            args.append(f.read(size + 2)[:-2].decode(errors="replace"))
        yield args
