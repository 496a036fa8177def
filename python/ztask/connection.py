"""Reading a cluster's connection file (docs/protocol.md, "The connection
file") and securing sockets with what it says."""

import errno
import json
import os
import stat

from .errors import ClusterError

FILE_NAME = "ztask-cluster.json"


def named_profile_dir(name):
    """The profile directory NAME stands for: ~/.ztask/profile_NAME, as the
    programs' --profile NAME (and IPython's) names one."""
    if not isinstance(name, str) or not name or name in (".", "..") or not all(
        c.isascii() and (c.isalnum() or c in "._-") for c in name
    ):
        raise ValueError("%r is not a profile name (letters, digits, '.', '_', '-'); "
                         "give a directory as profile_dir" % (name,))
    return os.path.join(os.path.expanduser("~"), ".ztask", "profile_" + name)


def default_profile_dir():
    return os.environ.get("ZTASK_PROFILE_DIR") or named_profile_dir("default")


class ConnectionInfo:
    """The key, the endpoints and the CurveZMQ keys of one cluster."""

    def __init__(self, path, data):
        self.path = path
        self.key = bytes.fromhex(data["key"])
        self.hub = data["hub"]
        self.scheduler = data["scheduler"]
        self.curve = data.get("curve")

    def secure(self, socket):
        """Makes `socket` (a connecting one) a CurveZMQ client when the
        cluster encrypts."""
        if self.curve:
            socket.curve_serverkey = self.curve["server_public"].encode()
            socket.curve_publickey = self.curve["client_public"].encode()
            socket.curve_secretkey = self.curve["client_secret"].encode()


class _NotOwn(Exception):
    """The connection file is not a regular file of this user's own."""


# A connection file is a few hundred bytes.
_MAX_BYTES = 1 << 20


def _read_own_file(path):
    """The text and mode of `path`, opened without following a symbolic link
    (one placed in the profile would hand the key, and where this client
    connects, to the link's owner) and refused unless this user owns it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _NotOwn(
                "connection file %s is a symbolic link; it is read only as a regular file "
                "of your own (remove the link)" % path
            ) from None
        raise
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise _NotOwn("connection file %s is not a regular file" % path)
        if st.st_uid != os.geteuid():
            raise _NotOwn(
                "connection file %s belongs to user id %d, not to you (%d); whoever owns it "
                "holds the cluster's key and chooses where you connect"
                % (path, st.st_uid, os.geteuid())
            )
        data = f.read(_MAX_BYTES + 1)
    if len(data) > _MAX_BYTES:
        raise _NotOwn("connection file %s is larger than a connection file can be" % path)
    return data.decode("utf-8"), st.st_mode


def read(profile_dir=None):
    """The cluster of `profile_dir` (or of a connection file's path).
    Raises ClusterError saying what to do when there is none to use."""
    where = profile_dir or default_profile_dir()
    where = os.fspath(where)
    path = where if os.path.isfile(where) else os.path.join(where, FILE_NAME)
    try:
        text, mode = _read_own_file(path)
    except FileNotFoundError:
        raise ClusterError(
            "no cluster is running with profile %s: start one with: taskcluster start "
            "--profile-dir %s" % (where, where)
        ) from None
    except _NotOwn as e:
        raise ClusterError(str(e)) from None
    except OSError as e:
        raise ClusterError("cannot read %s: %s" % (path, e.strerror)) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ClusterError(
            "%s may be read by others than its owner: its key must stay secret (chmod 600 %s)"
            % (path, path)
        )
    try:
        data = json.loads(text)
        if data.get("version") != 1:
            raise ValueError('it must have "version": 1')
        scheme, key = data["signature_scheme"], data["key"]
        if scheme not in ("hmac-sha256", "none") or (scheme == "none") != (key == ""):
            raise ValueError("its signature_scheme and key do not agree")
        bytes.fromhex(key)
        for section, names in (
            ("hub", ("registration", "query", "notifier", "monitor", "events")),
            ("scheduler", ("client", "engine")),
        ):
            for name in names:
                if not isinstance(data[section][name], str):
                    raise ValueError("%s.%s is not a string" % (section, name))
        info = ConnectionInfo(path, data)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ClusterError("connection file %s is not valid: %s" % (path, e)) from None
    if not info.hub["query"] or not info.scheduler["client"]:
        raise ClusterError(
            "the cluster in %s has not finished starting (no hub or scheduler endpoint yet)" % where
        )
    return info
