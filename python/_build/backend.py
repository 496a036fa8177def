"""The package's build backend (PEP 517): a wheel of the ztask package's
files and nothing else, built with the standard library alone, so that
`pip install ./python` works where no package index can be reached."""

import base64
import hashlib
import os
import zipfile

NAME = "ztask"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _version():
    """The package's one version, ztask/__init__.py's __version__ (which a
    test holds to the project's, in the top-level CMakeLists.txt)."""
    with open(os.path.join(HERE, NAME, "__init__.py")) as f:
        for line in f:
            if line.startswith("__version__"):
                return line.split("=", 1)[1].strip().strip("\"'")
    raise RuntimeError("ztask/__init__.py names no __version__")


VERSION = _version()
METADATA = """Metadata-Version: 2.1
Name: ztask
Version: {version}
Summary: Python client for ztask clusters: futures for tasks, Python functions as tasks, IPython Parallel's API
Requires-Python: >=3.9
Requires-Dist: pyzmq
Requires-Dist: msgpack
Requires-Dist: cloudpickle
""".format(version=VERSION)
WHEEL = "Wheel-Version: 1.0\nGenerator: ztask-backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def _files():
    yield os.path.join(HERE, "ztask_worker.py"), "ztask_worker.py"
    root = os.path.join(HERE, NAME)
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                yield path, os.path.relpath(path, HERE)


def _digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    dist_info = "%s-%s.dist-info" % (NAME, VERSION)
    filename = "%s-%s-py3-none-any.whl" % (NAME, VERSION)
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as wheel:
        def add(arcname, data):
            wheel.writestr(arcname, data)
            record.append("%s,%s,%d" % (arcname, _digest(data), len(data)))

        for path, arcname in _files():
            with open(path, "rb") as f:
                add(arcname, f.read())
        add(dist_info + "/METADATA", METADATA.encode())
        add(dist_info + "/WHEEL", WHEEL.encode())
        record.append(dist_info + "/RECORD,,")
        wheel.writestr(dist_info + "/RECORD", "\n".join(record) + "\n")
    return filename


def build_sdist(sdist_directory, config_settings=None):
    import tarfile

    base = "%s-%s" % (NAME, VERSION)
    filename = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz") as tar:
        for extra in ("pyproject.toml", "README.md", "_build/backend.py"):
            tar.add(os.path.join(HERE, extra), arcname=base + "/" + extra)
        for path, arcname in _files():
            tar.add(path, arcname=base + "/" + arcname)
        info = tarfile.TarInfo(base + "/PKG-INFO")
        data = METADATA.encode()
        info.size = len(data)
        import io

        tar.addfile(info, io.BytesIO(data))
    return filename
