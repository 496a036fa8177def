"""What a broken or hostile peer sends the Python client: dropped, counted,
and the client goes on; a wrongly keyed peer settles nothing."""

import json
import os

import msgpack
import pytest
import zmq

import ztask
from ztask import protocol

KEY = bytes(range(32))


def fake_cluster(tmp_path):
    """A ROUTER in the scheduler's place (and one in the hub's), and a
    connection file naming them."""
    context = zmq.Context.instance()
    scheduler = context.socket(zmq.ROUTER)
    hub = context.socket(zmq.ROUTER)
    for s in (scheduler, hub):
        s.linger = 0
        s.bind("tcp://127.0.0.1:0")
    endpoint = lambda s: s.getsockopt_string(zmq.LAST_ENDPOINT)  # noqa: E731
    info = {
        "version": 1, "signature_scheme": "hmac-sha256", "key": KEY.hex(),
        "hub": {"registration": endpoint(hub), "query": endpoint(hub), "notifier": endpoint(hub),
                "monitor": endpoint(hub), "events": endpoint(hub)},
        "scheduler": {"client": endpoint(scheduler), "engine": endpoint(scheduler)},
    }
    path = tmp_path / "ztask-cluster.json"
    path.write_text(json.dumps(info))
    os.chmod(path, 0o600)
    return scheduler, hub


def reply_record(request_header, result, ok=True):
    head = protocol.header(protocol.TASK_REPLY, "engine")
    meta = {"ok": ok, "error_type": None if ok else "TaskFailed", "engine_id": 3, "attempt": 1, "not_run": False}
    body = {"error_message": "", "result": result, "exit_code": None, "stdout": "", "stderr": "",
            "stdout_truncated": False, "stderr_truncated": False, "started": 1, "completed": 2}
    return protocol.encode_inner(head, request_header, meta, body)


def test_garbage_wrong_keys_and_broken_batches_are_dropped_and_the_client_goes_on(tmp_path):
    scheduler, hub = fake_cluster(tmp_path)
    client = ztask.Client(tmp_path)
    try:
        future = client.call("echo", 5)
        frames = scheduler.recv_multipart()
        peer, batch = frames[0], frames[1:]
        signer = protocol.Signer(KEY)
        protocol.check_frames(signer, batch)
        request = protocol.decode_inner(protocol.unpack_batch(batch)[0])
        assert request.content["function"] == "echo" and request.content["args"] == 5

        good = reply_record(request.header, 5)
        head = protocol.header(protocol.TASK_BATCH, "scheduler")
        hostile = [
            [b"not ztask"],
            [b"ZTASK3", b"", b"", b"", b"", b""],
            protocol.encode_batch(protocol.Signer(b"another key"), head, [reply_record(request.header, 666)]),
            protocol.encode_batch(signer, protocol.header(7, "s"), [good])[:6] + [b"\x09\x00\x00\x00"],
            protocol.encode_batch(signer, protocol.header(7, "s"), [[b"\xc1", b"\xc0", b"\x80", b"\x80"]]),
            protocol.encode_batch(signer, protocol.header(7, "s"), [reply_record(protocol.header(1, "x"), 7)]),
            protocol.encode_message(signer, protocol.header(protocol.TASK_REPLY, "s"), None, {}, {}),
            protocol.encode_message(signer, protocol.header(protocol.TASK_REPLY, "s"), request.header, "x", []),
            [b"ZTASK3", signer.mac([msgpack.packb([1] * 3)])] + [msgpack.packb([1] * 3)] * 4,
        ]
        for message in hostile:
            scheduler.send_multipart([peer] + message)
        scheduler.send_multipart([peer] + protocol.encode_batch(signer, protocol.header(7, "s"), [good]))
        assert future.result(10) == 5
        assert future.engine_id == 3
        assert client._io.dropped >= 7
        # A reply again (as after a reconnection) changes nothing.
        scheduler.send_multipart([peer] + protocol.encode_batch(signer, protocol.header(7, "s"),
                                                                 [reply_record(request.header, 9)]))
        assert future.result() == 5
    finally:
        client.close()
        scheduler.close()
        hub.close()


def test_a_hub_that_never_answers_is_a_cluster_error_not_a_hang(tmp_path):
    scheduler, hub = fake_cluster(tmp_path)
    client = ztask.Client(tmp_path)
    try:
        with pytest.raises(ztask.ClusterError, match="did not answer"):
            client._ask_hub(protocol.ENGINES_REQUEST, {}, timeout=0.5)
        assert hub.poll(1000)  # it was asked, signed
        protocol.check_frames(protocol.Signer(KEY), hub.recv_multipart()[1:])
    finally:
        client.close()
        scheduler.close()
        hub.close()


def test_python_tasks_whose_bodies_cannot_be_read_fail_and_nothing_hangs(client):
    from ztask.client import _Options, _spec

    options = _Options.default()
    not_a_pickle_map, garbage, fine = client._send([
        ("python", _spec("python", "", args=[1, 2]), options.meta),
        ("python", _spec("python", "", args={"pickle": b"\x80\x05garbage"}), options.meta),
        ("python", _spec("python", "", args={"pickle": __import__("cloudpickle").dumps(
            {"fn": __import__("cloudpickle").dumps(abs), "args": (-3,)})}), options.meta),
    ])
    with pytest.raises(ztask.BadTask, match="pickle"):
        not_a_pickle_map.result(30)
    with pytest.raises(ztask.RemoteError) as caught:
        garbage.result(30)
    assert "Unpickling" in caught.value.ename or "pickle" in caught.value.evalue.lower()
    assert fine.result(30) == 3
