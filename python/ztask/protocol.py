"""The ztask wire protocol (docs/protocol.md), written from that page alone.

This module is the only place in the package that turns messages into
frames and frames into messages. Everything that arrives from the network is
untrusted: every decoding function raises ProtocolError for anything that is
not a well-formed message, and nothing else.

Thread safety: the functions are reentrant; a Signer is immutable.
"""

import hashlib
import hmac
import os
import random
import struct
import threading
import time

import msgpack

SIGNATURE = b"ZTASK3"
HMAC_BYTES = 32

# Message types (docs/protocol.md, "Message types"): the ones a client sends
# or receives.
TASK_REQUEST = 1
TASK_REPLY = 2
ABORT_REQUEST = 3
ABORT_REPLY = 4
TASK_BATCH = 7
RESULT_REQUEST = 20
RESULT_REPLY = 21
QUEUE_REQUEST = 22
QUEUE_REPLY = 23
ENGINES_REQUEST = 24
ENGINES_REPLY = 25
PURGE_REQUEST = 26
PURGE_REPLY = 27
SHUTDOWN_REQUEST = 28
SHUTDOWN_REPLY = 29

# Frames of a message after its routing envelope.
FRAME_SIGNATURE, FRAME_HMAC, FRAME_HEADER, FRAME_PARENT, FRAME_META, FRAME_CONTENT = range(6)
FRAME_RECORDS = 6
MIN_FRAMES = 6
MAX_FRAMES = 64
BATCH_FRAMES = 7
MAX_MESSAGE_BYTES = 64 << 20

# A batch: at most this many messages; senders put at most MAX_BATCH_TASKS
# tasks and, past the first, MAX_BATCH_BYTES in one.
MAX_BATCH_MESSAGES = 4096
MAX_BATCH_TASKS = 1024
MAX_BATCH_BYTES = 4 << 20
MIN_RECORD_FRAMES = 4
MAX_RECORD_FRAMES = 62

# Slots and resources a task may ask (protocol/resources.h).
MAX_SLOTS = 4096
MAX_UNITS = 4096
MAX_RESOURCE_NAMES = 16

ERROR_TYPES = (
    "TaskFailed",
    "ImpossibleDependency",
    "InvalidDependency",
    "TaskTimeout",
    "TimeLimitExceeded",
    "EngineError",
    "TaskAborted",
    "TaskRejected",
    "BadTask",
    "Unsatisfiable",
)


class ProtocolError(Exception):
    """A message that is not a well-formed, correctly signed ztask message."""


# ---- values ---------------------------------------------------------------


class Packed(bytes):
    """A value packed already (pack() returns it as it is)."""


def pack(value):
    """One msgpack value, as ztask's codec writes it: strings as str, bytes
    as bin, integral floats as integers."""
    if type(value) is Packed:
        return value
    return msgpack.packb(value, use_bin_type=True, default=_not_packable)


def _not_packable(value):
    raise TypeError("cannot be sent as a msgpack value: %s" % type(value).__name__)


def unpack(data):
    """Exactly one msgpack value, or ProtocolError."""
    try:
        return msgpack.unpackb(
            data,
            raw=False,
            strict_map_key=False,
            ext_hook=_no_ext,
        )
    except ProtocolError:
        raise
    except Exception as e:  # msgpack raises several kinds for bad input
        raise ProtocolError("not one msgpack value: %s" % e) from None


def _no_ext(code, data):
    raise ProtocolError("extension types are not allowed (type %d)" % code)


def seconds(value):
    """A float field (timeout, time_limit) as the C++ codec writes it:
    an integer when it has no fraction."""
    value = float(value)
    return int(value) if value.is_integer() else value


def lean(fields, defaults):
    """`fields` without those equal to their entry in `defaults`: what
    every task carries (its routing, dependencies and spec) leaves its
    defaults out, as the C++ codec does, and readers take a missing field
    as its default (docs/protocol.md, "Field encoding")."""
    return {k: v for k, v in fields.items() if k not in defaults or v != defaults[k]}


ROUTING_DEFAULTS = {"after": {}, "follow": {}, "targets": [], "timeout": 0, "time_limit": 0, "retries": 0,
                    "priority": 0}
DEPENDENCY_DEFAULTS = {"ids": [], "mode": "all", "outcome": "success"}
SPEC_DEFAULTS = {"kind": "", "function": "", "args": None, "argv": [], "cwd": "", "env": {}, "label": ""}


# ---- ids and dates ----------------------------------------------------------


# Ids need to be unique, not secret: drawn from a generator seeded by the
# system once per process (re-seeded in a forked child), without a system
# call per id (which, from a submitting thread, hands the interpreter's lock
# to the client's I/O thread every time).
_ids = random.Random(os.urandom(32))
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _ids.seed(os.urandom(32)))


def new_task_id():
    """A new task id: the time in ms in the first 48 bits (big-endian), 80
    random bits after, so that the hub's index grows at its end."""
    ms = int(time.time() * 1000) & ((1 << 48) - 1)
    return ((ms << 80) | _ids.getrandbits(80)).to_bytes(16, "big")


def random_id():
    return _ids.getrandbits(128).to_bytes(16, "big")


def id_hex(task_id):
    return bytes(task_id).hex()


def id_from(value):
    """A task id from 16 bytes or 32 hex digits (ValueError otherwise)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        if len(value) != 16:
            raise ValueError("a task id is 16 bytes, not %d" % len(value))
        return bytes(value)
    if isinstance(value, str):
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raw = b""
        if len(raw) != 16:
            raise ValueError("%r is not a task id (32 hex digits)" % value)
        return raw
    raise TypeError("a task id is a hex string or 16 bytes, not %s" % type(value).__name__)


_date_lock = threading.Lock()
_last_date = 0


def now_date():
    """µs since the Unix epoch, strictly increasing within this process
    (receivers refuse a date not after the last of a session)."""
    global _last_date
    with _date_lock:
        _last_date = max(int(time.time() * 1e6), _last_date + 1)
        return _last_date


def header(msg_type, session, msg_id=None, date=None):
    return {
        "id": msg_id if msg_id is not None else random_id(),
        "type": msg_type,
        "session": session,
        "date": date if date is not None else now_date(),
    }


# ---- signing ----------------------------------------------------------------


class Signer:
    """HMAC-SHA256 over frames 2.., each preceded by its length as 8 bytes
    little-endian. An empty key signs nothing (a keyless cluster)."""

    def __init__(self, key):
        self.key = bytes(key)

    def mac(self, frames):
        if not self.key:
            return b""
        h = hmac.new(self.key, digestmod=hashlib.sha256)
        for f in frames:
            h.update(struct.pack("<Q", len(f)))
            h.update(f)
        return h.digest()

    def verify(self, frames):
        mac = bytes(frames[FRAME_HMAC])
        if not self.key:
            return mac == b""
        return len(mac) == HMAC_BYTES and hmac.compare_digest(mac, self.mac(frames[FRAME_HEADER:]))


# ---- messages ---------------------------------------------------------------


HEADER_LAYOUT = 1
_HEADER = struct.Struct("<BB16sqB")  # layout, type, id, date, session length
MAX_SESSION_BYTES = 255


def encode_header(head):
    """A header in its fixed layout (docs/protocol.md, "The header")."""
    session = head["session"].encode("utf-8")
    if len(session) > MAX_SESSION_BYTES:
        raise ValueError("a session of %d bytes, more than %d" % (len(session), MAX_SESSION_BYTES))
    return _HEADER.pack(HEADER_LAYOUT, head["type"], bytes(head["id"]), head["date"], len(session)) + session


def encode_parent(parent):
    """Frame 3: the parent's header, or nothing."""
    return b"" if parent is None else encode_header(parent)


def encode_inner(head, parent, meta, content, buffers=()):
    """A message's frames from its header on (what a batch's record holds)."""
    return [encode_header(head), encode_parent(parent), pack(meta), pack(content), *[bytes(b) for b in buffers]]


def encode_message(signer, head, parent, meta, content, buffers=()):
    inner = encode_inner(head, parent, meta, content, buffers)
    return [SIGNATURE, signer.mac(inner)] + inner


def records(messages):
    """Frame 6 of a batch: per message its frame count, then each frame's
    length and bytes, all counts unsigned 32-bit little-endian."""
    out = []
    for frames in messages:
        out.append(struct.pack("<I", len(frames)))
        for f in frames:
            out.append(struct.pack("<I", len(f)))
            out.append(f)
    return b"".join(out)


def encode_batch(signer, head, messages, dispatch=None):
    """A task_batch of `messages` (each its frames from the header on)."""
    content = {} if dispatch is None else {"dispatch": dispatch}
    inner = [encode_header(head), encode_parent(None), pack({}), pack(content), records(messages)]
    return [SIGNATURE, signer.mac(inner)] + inner


class Message:
    """A decoded message: header, parent (None or a header), meta, content,
    and its buffers (frames 6..) as bytes."""

    __slots__ = ("header", "parent", "meta", "content", "buffers")

    def __init__(self, header, parent, meta, content, buffers):
        self.header = header
        self.parent = parent
        self.meta = meta
        self.content = content
        self.buffers = buffers

    @property
    def type(self):
        return self.header["type"]


def check_frames(signer, frames):
    """Raises ProtocolError unless `frames` is a signed ztask message within
    the limits on frames and bytes."""
    if len(frames) < MIN_FRAMES:
        raise ProtocolError("%d frames, fewer than %d" % (len(frames), MIN_FRAMES))
    if len(frames) > MAX_FRAMES:
        raise ProtocolError("%d frames, more than %d" % (len(frames), MAX_FRAMES))
    if sum(len(f) for f in frames) > MAX_MESSAGE_BYTES:
        raise ProtocolError("more than %d bytes" % MAX_MESSAGE_BYTES)
    if bytes(frames[FRAME_SIGNATURE]) != SIGNATURE:
        raise ProtocolError("frame 0 is not %s (another protocol or version)" % SIGNATURE.decode())
    if not signer.verify(frames):
        raise ProtocolError("bad signature")


def decode_header(data):
    data = bytes(data)
    if data[:1] == bytes([HEADER_LAYOUT]):
        if len(data) < _HEADER.size or len(data) != _HEADER.size + data[_HEADER.size - 1]:
            raise ProtocolError("a header of %d bytes, not its layout's %d and its session" % (len(data), _HEADER.size))
        _, msg_type, msg_id, date, _ = _HEADER.unpack_from(data)
        try:
            session = data[_HEADER.size:].decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("a header whose session is not UTF-8") from None
        return {"id": msg_id, "type": msg_type, "session": session, "date": date}
    # As msgpack wrote it before the fixed layout (a request kept from then).
    h = unpack(data)
    if not isinstance(h, dict):
        raise ProtocolError("a header that is neither its layout nor a map")
    msg_id, msg_type = h.get("id"), h.get("type")
    if not isinstance(msg_id, bytes) or len(msg_id) != 16:
        raise ProtocolError("a header without a 16-byte id")
    if not isinstance(msg_type, int) or isinstance(msg_type, bool) or not 0 <= msg_type < 256:
        raise ProtocolError("a header without a message type")
    if not isinstance(h.get("session"), str) or not isinstance(h.get("date"), int):
        raise ProtocolError("a header without its session or date")
    return h


def decode_inner(frames):
    """A message from its frames from the header on (a batch's record)."""
    if len(frames) < MIN_RECORD_FRAMES:
        raise ProtocolError("a message of %d frames" % len(frames))
    head = decode_header(frames[0])
    parent = None if bytes(frames[1]) in (b"", b"\xc0") else decode_header(frames[1])
    meta, content = unpack(frames[2]), unpack(frames[3])
    if not isinstance(meta, dict) or not isinstance(content, dict):
        raise ProtocolError("metadata or content that is not a map")
    return Message(head, parent, meta, content, [bytes(b) for b in frames[4:]])


def decode_message(signer, frames):
    check_frames(signer, frames)
    return decode_inner(frames[FRAME_HEADER:])


def unpack_batch(frames):
    """The messages of a batch (each a list of frames from its header on)."""
    if len(frames) != BATCH_FRAMES:
        raise ProtocolError("a batch of %d frames, not %d" % (len(frames), BATCH_FRAMES))
    data = memoryview(frames[FRAME_RECORDS])
    out, at, end = [], 0, len(data)

    def u32():
        nonlocal at
        if end - at < 4:
            raise ProtocolError("a batch whose records run past its end")
        (n,) = struct.unpack_from("<I", data, at)
        at += 4
        return n

    while at < end:
        if len(out) >= MAX_BATCH_MESSAGES:
            raise ProtocolError("a batch of more than %d messages" % MAX_BATCH_MESSAGES)
        count = u32()
        if not MIN_RECORD_FRAMES <= count <= MAX_RECORD_FRAMES:
            raise ProtocolError("a record of %d frames" % count)
        message = []
        for _ in range(count):
            n = u32()
            if n > end - at:
                raise ProtocolError("a batch whose records run past its end")
            message.append(data[at : at + n])
            at += n
        out.append(message)
    return out
