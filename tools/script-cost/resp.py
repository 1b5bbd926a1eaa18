"""RESP for the cost tools (redisson.py, bodies.py): commands encoded as redis-cli --pipe and
the server read them, and replies read back one at a time, counting error replies."""
import socket
import sys


def encode(*args):
    """One command as RESP: an array of bulk strings (ints and strs written as text)."""
    b = [x if isinstance(x, bytes) else str(x).encode() for x in args]
    return b"*%d\r\n" % len(b) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in b)


class Conn:
    """A connection to 127.0.0.1:`port` that sends one command at a time and reads its reply
    before the next (`errors` counts the error replies)."""

    def __init__(self, port, show_errors=False):
        self.f = socket.create_connection(('127.0.0.1', port)).makefile('rwb')
        self.errors = 0
        self.show_errors = show_errors

    def cmd(self, *args):
        self.f.write(encode(*args))
        self.f.flush()
        self.reply()

    def reply(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b'-':
            self.errors += 1
            if self.show_errors:
                print(line.decode(errors='replace').rstrip(), file=sys.stderr)
        elif kind == b'$' and int(rest) >= 0:
            self.f.read(int(rest) + 2)
        elif kind == b'*' and int(rest) > 0:
            for _ in range(int(rest)):
                self.reply()
