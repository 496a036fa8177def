"""The Python package carries the project's one version: ztask.__version__
and the wheel its backend builds. usage: check_python_version.py PYTHON_DIR VERSION"""
import os
import sys

python_dir, version = sys.argv[1], sys.argv[2]
sys.path[:0] = [python_dir, os.path.join(python_dir, "_build")]
import backend  # noqa: E402
import ztask  # noqa: E402

found = (ztask.__version__, backend.VERSION)
if found != (version, version):
    sys.exit("the Python package says %s (module) and %s (wheel); the project is %s" % (*found, version))
print("the Python package is version", version)
