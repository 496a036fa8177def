"""IPython Parallel's AsyncResult over ztask futures: one message (a task)
per engine or per chunk, their results collected as IPython Parallel
returns them, their metadata as attributes and items (`ar.engine_id`,
`ar["completed"]`), and a concurrent.futures.Future of the whole.

Thread safety: as ztask's futures; the whole settles on the client's I/O
thread when its last task does.
"""

import concurrent.futures
import sys
import time

import ztask
import ztask_worker

from .. import error
from .metadata import Metadata, metadata_of, result_error

__all__ = ["AsyncResult", "AsyncMapResult", "AsyncHubResult"]


def _value(child, transform):
    value = child.result()
    if isinstance(value, ztask_worker.Displayed):
        value = value.value
    if transform is not None:
        return transform(value, child)
    if isinstance(value, ztask_worker.ExecuteOutcome):
        from .execute import ExecuteReply

        return ExecuteReply.of(value, child)
    return value


class AsyncResult(concurrent.futures.Future):
    """The results of tasks to come (one per message: `msg_ids`)."""

    def __init__(self, client, children, fname="unknown", targets=None, owner=True, return_exceptions=False,
                 single=None, method="apply", transform=None):
        super().__init__()
        self._client = client
        self._children = list(children)
        self._fname = fname
        self._targets = targets
        self.owner = owner
        self._return_exceptions = return_exceptions
        self._single_result = len(self._children) == 1 if single is None else single
        self._method = method
        self._transform = transform
        self._submitted = time.time()
        self._done_at = None
        self._left = len(self._children)
        self._outcome = None
        if not self._children:
            self._settle()
        for child in self._children:
            child.add_done_callback(self._child_done)

    # ---- settling -----------------------------------------------------------

    def _child_done(self, _child):
        with self._condition:
            self._left -= 1
            last = self._left == 0
        if last:
            self._settle()

    def _settle(self):
        self._done_at = time.time()
        try:
            value = self._collect(self._return_exceptions)
        except BaseException as e:  # a task's error: the whole's exception
            self._outcome = (None, e)
            if not concurrent.futures.Future.done(self):
                self.set_exception(e)
        else:
            self._outcome = (value, None)
            if not concurrent.futures.Future.done(self):
                self.set_result(value)
        self._client._forget(self)

    def _values(self):
        """(values, errors): one per message, errors as IPython Parallel's."""
        values, errors = [], []
        for i, child in enumerate(self._children):
            exc = result_error(child, self._method, self._client)
            if exc is None:
                values.append(_value(child, self._transform))
            else:
                values.append(exc)
            errors.append(exc)
        return values, errors

    def _collect(self, return_exceptions):
        values, errors = self._values()
        failures = [e for e in errors if e is not None]
        if failures and not return_exceptions:
            if self._single_result:
                raise failures[0]
            raise error.CompositeError("one or more exceptions raised in: %s" % self._fname, failures)
        return self._shape(values)

    def _shape(self, values):
        return values[0] if self._single_result else values

    # ---- IPython Parallel's API ---------------------------------------------

    @property
    def msg_ids(self):
        return [c.id for c in self._children]

    @property
    def _futures(self):
        return self._children

    def ready(self):
        return all(c.done() for c in self._children)

    def wait(self, timeout=-1, return_when=None):
        """Waits for every task (or `return_when`: FIRST_COMPLETED,
        FIRST_EXCEPTION); True when all are done. With return_when, returns
        (done, pending): sets of one-message AsyncResults."""
        timeout = None if timeout is None or timeout < 0 else timeout
        if return_when is None or return_when == ztask.ALL_COMPLETED:
            ztask.wait(self._children, timeout=timeout)
            done = self.ready()
            if done:
                concurrent.futures.wait([self], timeout=1)
            return done
        parts = self.split()
        done, pending = concurrent.futures.wait(parts, timeout=timeout, return_when=return_when)
        return done, pending

    def get(self, timeout=-1, return_exceptions=None):
        """The result (a list of them for several engines or messages);
        raises the task's error (a CompositeError for several), or
        error.TimeoutError when not ready within `timeout`."""
        if not self.wait(timeout):
            raise error.TimeoutError("Result not ready.")
        if return_exceptions is None or return_exceptions == self._return_exceptions:
            value, exc = self._outcome
            if exc is not None:
                raise exc
            return value
        return self._collect(return_exceptions)

    def result(self, timeout=None):
        return self.get(-1 if timeout is None else timeout)

    def successful(self):
        if not self.ready():
            raise AssertionError("not yet done; wait() first")
        return all(result_error(c, self._method, self._client) is None for c in self._children)

    def get_dict(self, timeout=-1):
        """{engine_id: result}; ValueError when engines ran more than one of
        the tasks."""
        results = self.get(timeout)
        results = [results] if self._single_result else results
        engines = self.engine_id
        engines = [engines] if self._single_result else engines
        if len(set(engines)) != len(engines):
            raise ValueError("cannot create a dict: engines ran more than one of the tasks")
        return dict(zip(engines, results))

    def abort(self):
        """Aborts the tasks that have not started."""
        return self._client._ztask.abort(self._children)

    # ---- metadata -------------------------------------------------------------

    @property
    def metadata(self):
        md = [metadata_of(c, self._client) for c in self._children]
        return md[0] if self._single_result else md

    def _metadata_key(self, key):
        if key not in Metadata.KEYS:
            raise KeyError(key)
        md = [metadata_of(c, self._client)[key] for c in self._children]
        return md[0] if self._single_result else md

    def __getitem__(self, key):
        if isinstance(key, int):
            return self._child_ar(self._children[key]).get()
        if isinstance(key, slice):
            return [self._child_ar(c).get() for c in self._children[key]]
        if isinstance(key, str):
            return self._metadata_key(key)
        raise TypeError("Invalid key type %r, must be 'int', 'slice' or 'str'" % type(key))

    def __getattr__(self, key):
        if key.startswith("_") or key not in Metadata.KEYS:
            raise AttributeError("%r object has no attribute %r" % (type(self).__name__, key))
        return self._metadata_key(key)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(Metadata.KEYS))

    @property
    def sent(self):
        return True

    def wait_for_send(self, timeout=-1):
        return True

    def wait_for_output(self, timeout=-1):
        """Outputs come with each reply: True once the tasks are done."""
        return self.wait(timeout)

    @property
    def data(self):
        """What the tasks published (publish_data), once they are done."""
        md = self.metadata
        return md["data"] if self._single_result else [m["data"] for m in md]

    @property
    def outputs(self):
        md = self.metadata
        return md["outputs"] if self._single_result else [m["outputs"] for m in md]

    # ---- times ------------------------------------------------------------------

    def _times(self):
        if not self.ready():
            raise error.TimeoutError("Result not ready.")
        md = [metadata_of(c, self._client) for c in self._children]
        return md

    @property
    def wall_time(self):
        """From the first submission to the last completion, in seconds."""
        md = self._times()
        submitted = min(m["submitted"] for m in md if m["submitted"])
        completed = max(m["completed"] for m in md if m["completed"])
        return (completed - submitted).total_seconds()

    @property
    def serial_time(self):
        """The sum of the tasks' running times, in seconds."""
        return sum((m["completed"] - m["started"]).total_seconds() for m in self._times()
                   if m["completed"] and m["started"])

    @property
    def elapsed(self):
        """Seconds since submission (until completion once done)."""
        end = self._done_at if self._done_at is not None else time.time()
        return end - self._submitted

    @property
    def progress(self):
        return sum(1 for c in self._children if c.done())

    def wait_interactive(self, interval=0.1, timeout=-1, widget=None, return_when=None):
        """Waits, showing progress on a terminal; returns what wait() does."""
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            step = interval if left is None else min(interval, left)
            outcome = self.wait(step, return_when=return_when)
            finished = outcome if return_when is None else (outcome[0] and (
                return_when == ztask.FIRST_COMPLETED or self.ready() or any(
                    a.exception(0) is not None for a in outcome[0])))
            if finished or (left is not None and left <= 0):
                break
            if sys.stdout.isatty():
                print("\r%4i/%i tasks finished after %4i s" % (self.progress, len(self._children), self.elapsed),
                      end="", flush=True)
        return outcome

    def display_outputs(self, groupby="type"):
        """Prints what each task printed (stdout, then stderr), labelled by
        engine, as IPython Parallel does."""
        for child in self._children:
            md = metadata_of(child, self._client)
            for stream, target in (("stdout", sys.stdout), ("stderr", sys.stderr)):
                text = md[stream]
                if not text:
                    continue
                if self._single_result:
                    print(text, end="" if text.endswith("\n") else "\n", file=target)
                else:
                    print("[%s:%s]" % (stream, md["engine_id"]), file=target)
                    print(text, end="" if text.endswith("\n") else "\n", file=target)
            result = md.get("execute_result")
            if result:
                print("Out[%s:%s]: %s" % (md["engine_id"], result.get("execution_count", ""),
                                          result["data"].get("text/plain", "")))

    # ---- splitting and joining ---------------------------------------------------

    def _child_ar(self, child):
        return AsyncResult(self._client, [child], fname=self._fname, owner=False, single=True,
                           method=self._method, transform=self._transform,
                           return_exceptions=self._return_exceptions)

    def split(self):
        """One AsyncResult per message (itself when there is one)."""
        if len(self._children) == 1:
            return (self,)
        return tuple(self._child_ar(c) for c in self._children)

    @classmethod
    def join(cls, *results):
        """One AsyncResult of several."""
        first = results[0]
        children = [c for r in results for c in r._children]
        return AsyncResult(first._client, children, fname=first._fname, owner=False, single=False,
                           method=first._method, transform=first._transform)

    def __len__(self):
        return len(self._children)

    def __iter__(self):
        """The results, each as soon as it is ready (in order)."""
        if self._single_result:
            yield self.get()
            return
        for child in self._children:
            yield from self._child_values(child)

    def _child_values(self, child):
        concurrent.futures.wait([child])
        exc = result_error(child, self._method, self._client)
        if exc is not None:
            if self._return_exceptions:
                yield exc
                return
            raise exc
        yield _value(child, self._transform)

    def __repr__(self):
        state = "finished" if self.ready() else "pending"
        return "<%s(%s): %s>" % (type(self).__name__, self._fname, state)


class AsyncMapResult(AsyncResult):
    """A map's results, one element per call. `chunked`: each message ran
    several calls and returns their results as a list (a direct view's
    map: one message per engine), flattened here in order. With
    ordered=False, iterating yields results as they come."""

    def __init__(self, client, children, fname="map", ordered=True, return_exceptions=False, chunked=False,
                 targets=None, owner=True):
        self._chunked = chunked
        self._ordered = ordered
        self._count = None
        self._sizes = None  # calls per message, when chunked
        super().__init__(client, children, fname=fname, single=False, return_exceptions=return_exceptions,
                         targets=targets, owner=owner)

    def _shape(self, values):
        if not self._chunked:
            return values
        out = []
        for v in values:
            if isinstance(v, list):
                out.extend(v)
            else:
                out.append(v)  # an error in place of a chunk
        return out

    def _child_values(self, child):
        for value in super()._child_values(child):
            if self._chunked and isinstance(value, list):
                yield from value
            else:
                yield value

    def __len__(self):
        return len(self._children) if self._count is None else self._count

    @property
    def progress(self):
        """How many calls are done."""
        if self._sizes is None:
            return super().progress
        return sum(size for size, c in zip(self._sizes, self._children) if c.done())

    def __iter__(self):
        children = self._children if self._ordered else concurrent.futures.as_completed(self._children)
        for child in children:
            yield from self._child_values(child)

    def split(self):
        """One AsyncResult per message, whose result is that message's list
        of results."""
        as_list = None if self._chunked else (lambda value, child: [value])
        return tuple(AsyncResult(self._client, [c], fname=self._fname, owner=False, single=False,
                                 transform=as_list) for c in self._children)

    def get_dict(self, timeout=-1):
        raise ValueError("a map's results cannot be a dict by engine: engines run several of its calls")


class AsyncHubResult(AsyncResult):
    """Results of tasks this client did not submit (or no longer holds),
    from the hub's records."""
