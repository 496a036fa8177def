"""IPython Parallel's helpers that programs use: interactive, utc, and a
few more of ipyparallel.util."""

import datetime
import socket
import sys
import types

utc = datetime.timezone.utc


def interactive(f):
    """Marks a function as defined interactively (as if typed at the
    prompt: its globals are __main__'s): on an engine it runs with the
    engine's namespace as its globals, what `push` and `execute` put there."""
    if isinstance(f, types.FunctionType):
        main = sys.modules["__main__"]
        g = types.FunctionType(f.__code__, main.__dict__, f.__name__, f.__defaults__, f.__closure__)
        g.__kwdefaults__ = f.__kwdefaults__
        g.__doc__ = f.__doc__
        g.__dict__.update(f.__dict__)
        f = g
    f.__module__ = "__main__"
    return f


def is_local_ip(ip):
    """True when `ip` is an address of this machine."""
    if ip in ("localhost", "127.0.0.1", "0.0.0.0", "::1", "*"):
        return True
    try:
        return ip in socket.gethostbyname_ex(socket.gethostname())[2]
    except OSError:
        return False


def ensure_timezone(dt):
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=utc)


def _datetime(us):
    """A record's µs since the epoch as an aware datetime (None for none)."""
    return datetime.datetime.fromtimestamp(us / 1e6, utc) if us else None
