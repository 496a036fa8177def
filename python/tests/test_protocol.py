"""The codec against docs/protocol.md's test vector, byte for byte, and
against what a hostile peer could send."""

import os
import re
import struct

import pytest

from ztask import protocol

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "protocol.md")
KEY = b"test-vector-key"


def documented_frames():
    with open(DOCS, encoding="utf-8") as f:
        page = f.read()
    block = re.search(r"```text task_batch test vector\n(.*?)```", page, re.S)
    assert block, "docs/protocol.md has no task_batch test vector"
    frames = []
    for line in block.group(1).splitlines():
        number, _, hex_bytes = line.partition(":")
        assert number == "frame %d" % len(frames)
        frames.append(bytes.fromhex(hex_bytes.strip()))
    return frames


def fixed_header(msg_type, n, session):
    return protocol.header(
        msg_type, session, bytes.fromhex("0123456789abcdef") + n.to_bytes(8, "big"), 1_700_000_000_000_000
    )


def routing():
    """The routing of a task with no options: every field at its default,
    so none is sent."""
    return protocol.lean(
        {
            "after": protocol.lean({"ids": [], "mode": "all", "outcome": "success"}, protocol.DEPENDENCY_DEFAULTS),
            "follow": {},
            "targets": [],
            "timeout": protocol.seconds(0),
            "time_limit": protocol.seconds(0),
            "retries": 0,
            "priority": 0,
        },
        protocol.ROUTING_DEFAULTS,
    )


def spec(function, args):
    return protocol.lean(
        {"kind": "function", "function": function, "args": args, "argv": [], "cwd": "", "env": {}, "label": ""},
        protocol.SPEC_DEFAULTS,
    )


def made_batch():
    signer = protocol.Signer(KEY)
    tasks = [
        protocol.encode_inner(fixed_header(protocol.TASK_REQUEST, 1, "client-1"), None, routing(), spec("noop", None)),
        protocol.encode_inner(
            fixed_header(protocol.TASK_REQUEST, 2, "client-1"), None, routing(), spec("echo", [1, 2, 3])
        ),
    ]
    dispatch = [
        {"attempt": 1, "engines": 2},
        {"attempt": 1, "engines": 2, "run_after": fixed_header(1, 1, "")["id"]},
    ]
    return protocol.encode_batch(signer, fixed_header(protocol.TASK_BATCH, 3, "scheduler-1"), tasks, dispatch)


def test_the_documented_vector_is_what_this_codec_makes():
    assert made_batch() == documented_frames()


def test_the_documented_vector_decodes_to_its_two_tasks():
    frames = documented_frames()
    batch = protocol.decode_message(protocol.Signer(KEY), frames)
    assert batch.type == protocol.TASK_BATCH
    assert batch.header["session"] == "scheduler-1"
    assert [d.get("run_after") for d in batch.content["dispatch"]] == [None, fixed_header(1, 1, "")["id"]]
    messages = [protocol.decode_inner(m) for m in protocol.unpack_batch(frames)]
    assert [m.content["function"] for m in messages] == ["noop", "echo"]
    assert messages[1].content["args"] == [1, 2, 3]
    assert messages[0].header["id"].hex() == "0123456789abcdef0000000000000001"


def test_one_changed_byte_anywhere_fails_the_signature():
    signer = protocol.Signer(KEY)
    original = documented_frames()
    for i in range(protocol.FRAME_HEADER, len(original)):
        if not original[i]:
            continue  # the parent: none
        frames = list(original)
        changed = bytearray(frames[i])
        changed[len(changed) // 2] ^= 1
        frames[i] = bytes(changed)
        with pytest.raises(protocol.ProtocolError, match="signature"):
            protocol.decode_message(signer, frames)


def test_another_key_or_no_mac_is_refused():
    frames = documented_frames()
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_message(protocol.Signer(b"another key"), frames)
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_message(protocol.Signer(KEY), frames[:1] + [b""] + frames[2:])
    # A keyless receiver refuses a message that carries a MAC.
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_message(protocol.Signer(b""), frames)


def signed_batch(records_frame):
    signer = protocol.Signer(KEY)
    inner = [protocol.encode_header(fixed_header(7, 9, "s")), protocol.encode_parent(None), protocol.pack({}), protocol.pack({}), records_frame]
    return signer, [protocol.SIGNATURE, signer.mac(inner)] + inner


@pytest.mark.parametrize(
    "records_frame, why",
    [
        (struct.pack("<I", 3) + b"", "3 frames"),
        (struct.pack("<I", 63), "63 frames"),
        (struct.pack("<II", 4, 100) + b"x", "past its end"),
        (b"\x04\x00", "past its end"),
        (struct.pack("<I", 4) + struct.pack("<I", 0) * 3, "past its end"),
    ],
)
def test_records_out_of_range_or_past_the_end_are_malformed(records_frame, why):
    signer, frames = signed_batch(records_frame)
    protocol.check_frames(signer, frames)
    with pytest.raises(protocol.ProtocolError):
        protocol.unpack_batch(frames)


def test_too_many_messages_in_a_batch_is_malformed():
    one = [b"\xc0"] * 4
    _, frames = signed_batch(protocol.records([one] * (protocol.MAX_BATCH_MESSAGES + 1)))
    with pytest.raises(protocol.ProtocolError, match="more than"):
        protocol.unpack_batch(frames)


@pytest.mark.parametrize(
    "data",
    [b"", b"\x92\x01", b"\xc0\xc0", b"\xd4\x01\x00", b"\x91" * 100_000 + b"\xc0", b"\xc1"],
)
def test_anything_but_one_msgpack_value_is_a_protocol_error(data):
    with pytest.raises(protocol.ProtocolError):
        protocol.unpack(data)


def test_headers_without_their_fields_are_refused():
    for bad in [[], {"id": b"short", "type": 1, "session": "s", "date": 1}, {"id": b"x" * 16, "type": "1", "session": "s", "date": 1}]:
        with pytest.raises(protocol.ProtocolError):
            protocol.decode_header(protocol.pack(bad))


def test_a_header_is_its_fixed_layout_as_documented():
    head = fixed_header(protocol.TASK_BATCH, 3, "scheduler-1")
    frame = protocol.encode_header(head)
    assert frame.hex() == "0107" "0123456789abcdef0000000000000003" "00401e18240a0600" "0b" + b"scheduler-1".hex()
    assert protocol.decode_header(frame) == head
    assert protocol.encode_parent(None) == b""


def test_a_header_cut_grown_or_of_another_layout_is_refused():
    frame = protocol.encode_header(fixed_header(protocol.TASK_REQUEST, 1, "client-1"))
    for bad in [frame[:-1], frame[:10], frame + b"x", b"\x02" + frame[1:], b"", frame[:26] + b"\x09" + frame[27:]]:
        with pytest.raises(protocol.ProtocolError):
            protocol.decode_header(bad)


def test_a_header_as_msgpack_wrote_it_before_is_still_read():
    head = fixed_header(protocol.TASK_REQUEST, 1, "client-1")
    assert protocol.decode_header(protocol.pack(head)) == head


def test_new_ids_grow_with_time_and_are_unique():
    ids = [protocol.new_task_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(len(i) == 16 for i in ids)
    assert ids[-1][:6] >= ids[0][:6]


def test_dates_strictly_increase():
    dates = [protocol.now_date() for _ in range(1000)]
    assert all(b > a for a, b in zip(dates, dates[1:]))


def _connection_file(path, mode=0o600):
    import json

    path.write_text(json.dumps({
        "version": 1, "signature_scheme": "hmac-sha256", "key": "00" * 32,
        "hub": {n: "tcp://127.0.0.1:1" for n in
                ("registration", "query", "notifier", "monitor", "events")},
        "scheduler": {"client": "tcp://127.0.0.1:2", "engine": "tcp://127.0.0.1:3"},
    }))
    os.chmod(path, mode)


def test_a_connection_file_of_ones_own_is_read(tmp_path):
    from ztask import connection

    _connection_file(tmp_path / connection.FILE_NAME)
    assert connection.read(tmp_path).scheduler["client"] == "tcp://127.0.0.1:2"


def test_a_connection_file_that_is_a_symbolic_link_is_not_followed(tmp_path):
    from ztask import ClusterError, connection

    _connection_file(tmp_path / "someone-elses.json")
    profile = tmp_path / "profile"
    profile.mkdir()
    os.symlink(tmp_path / "someone-elses.json", profile / connection.FILE_NAME)
    with pytest.raises(ClusterError, match="symbolic link"):
        connection.read(profile)


# Needs root (a file owned by another user); skipped otherwise.
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")
def test_a_connection_file_another_user_owns_is_refused(tmp_path):
    from ztask import ClusterError, connection

    _connection_file(tmp_path / connection.FILE_NAME)
    os.chown(tmp_path / connection.FILE_NAME, 65534, 65534)
    with pytest.raises(ClusterError, match="not to you"):
        connection.read(tmp_path)
