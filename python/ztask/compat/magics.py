"""IPython's parallel magics over a ztask DirectView: %px and %%px (run
code on the engines), %autopx (every cell on the engines until %autopx
again), %pxresult (the latest result again) and %pxconfig (the view's
targets, blocking, verbosity). Registered through IPython's own magics
mechanism by Client (when IPython runs), view.activate(suffix) or
`%load_ext ztask.compat`.
"""

import argparse
import shlex
import sys

from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand

from . import error

__all__ = ["ParallelMagics"]


def _parser(cell=False):
    p = argparse.ArgumentParser(prog="%px", add_help=False)
    p.add_argument("--targets", "-t", default=None)
    p.add_argument("--block", dest="block", action="store_true", default=None)
    p.add_argument("--noblock", "--no-block", dest="block", action="store_false")
    p.add_argument("--verbose", dest="verbose", action="store_true", default=None)
    p.add_argument("--no-verbose", dest="verbose", action="store_false")
    if cell:
        p.add_argument("--local", action="store_true", default=False)
        p.add_argument("--out", "-o", default=None)
        p.add_argument("--group-outputs", default="type", choices=("engine", "order", "type"))
        p.add_argument("--stream", dest="stream", action="store_true", default=None)
        p.add_argument("--no-stream", dest="stream", action="store_false")
        p.add_argument("--save-name", default=None)
        p.add_argument("--signal-on-interrupt", default="SIGINT")
    return p


def _targets(text):
    if text is None:
        return None
    if text == "all":
        return "all"
    if ":" in text:
        return slice(*[int(x) if x else None for x in text.split(":")])
    if "," in text:
        return [int(x) for x in text.split(",") if x]
    return int(text)


@magics_class
class ParallelMagics(Magics):
    """The magics of one view (a view of the latest Client when None)."""

    def __init__(self, shell, view, suffix=""):
        super().__init__(shell)
        self.view = view
        self.suffix = suffix
        self.verbose = False
        self.last_result = None
        self._autopx = False
        self._run_cell = None
        for kind, names in (("line", ("px", "autopx", "pxresult", "pxconfig", "result")), ("cell", ("px",))):
            for name in names:
                if name in self.magics[kind]:
                    self.magics[kind][name + suffix] = self.magics[kind].pop(name)

    def _view(self):
        if self.view is None:
            from .client.client import Client

            self.view = Client().direct_view("all")
            self.view.block = True
        return self.view

    @line_magic
    def pxconfig(self, line):
        """%pxconfig [--targets T] [--block|--noblock] [--verbose|--no-verbose]"""
        args = _parser().parse_args(shlex.split(line))
        view = self._view()
        if args.targets is not None:
            targets = _targets(args.targets)
            view.targets = view.client.ids[targets] if isinstance(targets, slice) else targets
        if args.block is not None:
            view.block = args.block
        if args.verbose is not None:
            self.verbose = args.verbose

    @line_magic
    def pxresult(self, line=""):
        """Shows the latest %px result again."""
        if self.last_result is None:
            raise RuntimeError("no %px result yet")
        self.last_result.wait()
        self._show(self.last_result, "type")

    result = pxresult

    @no_var_expand
    @line_cell_magic
    def px(self, line="", cell=None):
        """%px CODE, or %%px [options] with the code in the cell: runs it on
        the view's engines."""
        if cell is None:
            return self._execute(line, block=None, targets=None, groupby="type", stream=False)
        args = _parser(cell=True).parse_args(shlex.split(self.shell.var_expand(line)))
        if args.local:
            self.shell.run_cell(cell)
        return self._execute(cell, block=args.block, targets=args.targets, groupby=args.group_outputs,
                             stream=bool(args.stream), out=args.out, verbose=args.verbose,
                             signal_on_interrupt=args.signal_on_interrupt)

    def _execute(self, code, block, targets, groupby, stream, out=None, verbose=None,
                 signal_on_interrupt="SIGINT"):
        view = self._view()
        block = view.block if block is None else block
        verbose = self.verbose if verbose is None else verbose
        shown = targets if targets is not None else _shown(view.targets)
        targets = _targets(targets)
        if isinstance(targets, slice):
            targets = view.client.ids[targets]
        ar = view.execute(code, silent=False, targets=targets, block=False)
        self.last_result = ar
        if out:
            self.shell.user_ns[out] = ar
        if not block:
            if verbose:
                print("Async parallel execution on engine(s): %s" % shown)
            return ar
        if verbose:
            print("Parallel execution on engine(s): %s" % shown)
        try:
            ar.wait()
        except KeyboardInterrupt:
            print("Received Keyboard Interrupt. Sending signal %s to engines..." % signal_on_interrupt,
                  file=sys.stderr)
            sig = int(signal_on_interrupt) if signal_on_interrupt.isdigit() else signal_on_interrupt
            view.client.send_signal(sig, targets=targets if targets is not None else view.targets)
            return None
        self._show(ar, groupby)
        failures = [e for e in (ar.get(return_exceptions=True) if not ar._single_result else
                                [ar.get(return_exceptions=True)]) if isinstance(e, error.RemoteError)]
        if failures:
            if stream:
                for e in failures:
                    print("[%s:%s] %s: %s" % (e.engine_info.get("engine_id"), "execute", e.ename, e.evalue),
                          file=sys.stderr)
                raise _Displayed(failures)
            raise error.CompositeError("one or more exceptions raised in: execute", failures)
        return None

    def _show(self, ar, groupby):
        """Prints what the engines printed, displayed and returned, grouped
        by engine, by order (the i-th output of each engine together) or by
        type (all stdout, all outputs, all results)."""
        from .client.metadata import metadata_of

        mds = [metadata_of(c, ar._client) for c in ar._children]
        if groupby == "engine":
            for md in mds:
                _streams([md])
                _outputs([md])
                _results([md])
        elif groupby == "order":
            _streams(mds)
            for i in range(max((len(md["outputs"]) for md in mds), default=0)):
                _outputs([md for md in mds if len(md["outputs"]) > i], only=i)
            _results(mds)
        else:
            _streams(mds)
            _outputs(mds)
            _results(mds)

    @line_magic
    def autopx(self, line=""):
        """Runs every cell on the engines, until %autopx again."""
        if self._autopx:
            self._disable_autopx()
        else:
            self._enable_autopx()

    def _enable_autopx(self):
        self._run_cell = self.shell.run_cell
        magics = self

        def run_cell(raw_cell, *args, **kwargs):
            if raw_cell.strip().startswith(("%autopx", "%autopx" + magics.suffix)):
                magics._disable_autopx()
                return None
            try:
                return magics._execute(raw_cell, None, None, "type", False)
            except error.RemoteError as e:
                print("\n".join(e.render_traceback()))

        self.shell.run_cell = run_cell
        self._autopx = True
        print("%autopx enabled")

    def _disable_autopx(self):
        if self._run_cell is not None:
            self.shell.run_cell = self._run_cell
        self._autopx = False
        print("%autopx disabled")


class _Displayed(error.AlreadyDisplayedError):
    """Errors whose tracebacks %%px --stream printed already."""

    def __init__(self, failures):
        super().__init__(failures[0])
        self.failures = failures

    def render_traceback(self):
        return ["%d errors" % len(self.failures)]


def _streams(mds):
    for stream, target in (("stdout", sys.stdout), ("stderr", sys.stderr)):
        for md in mds:
            text = md[stream].rstrip("\n")
            if text:
                print("[%s:%s]" % (stream, md["engine_id"]), file=target)
                print(text, file=target)


def _outputs(mds, only=None):
    for md in mds:
        outputs = md["outputs"] if only is None else md["outputs"][only:only + 1]
        if outputs:
            print("[output:%s]" % md["engine_id"])
            for out in outputs:
                print(out.get("data", {}).get("text/plain", ""))


def _results(mds):
    for md in mds:
        result = md.get("execute_result")
        if result:
            print("Out[%s:%s]: %s" % (md["engine_id"], result.get("execution_count"),
                                      result["data"].get("text/plain", "")))


def _shown(targets):
    return "[%s]" % ", ".join(map(str, targets)) if isinstance(targets, list) else str(targets)
