"""`pip install ./python` in a virtual environment, with no package index."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_pip_installs_the_package_into_a_virtual_environment_offline(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--no-index", os.path.join(HERE, "..")],
        capture_output=True, text=True, timeout=300,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import ztask, ztask.compat, ztask_worker; print(ztask.__file__)"],
        capture_output=True, text=True, cwd=str(tmp_path), timeout=60,
    )
    assert probe.returncode == 0, probe.stderr
    assert str(venv) in probe.stdout
