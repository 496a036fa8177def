"""The program of docs/from-ipcluster.md, moved over from IPython Parallel,
runs as the page shows it against a real cluster."""

import os
import re

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "from-ipcluster.md")


def test_the_migrated_program_runs_as_documented(cluster, monkeypatch, capsys):
    with open(DOC) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    program = next(b for b in blocks if "ipp.Client()" in b)
    monkeypatch.setenv("ZTASK_PROFILE_DIR", cluster.profile)
    exec(compile(program, DOC, "exec"), {"__name__": "__main__"})
    assert "pi is about 3.1" in capsys.readouterr().out
