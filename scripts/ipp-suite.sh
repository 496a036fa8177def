#!/bin/sh
# Runs IPython Parallel's own test suite against ztask.compat.
#
# usage: scripts/ipp-suite.sh TESTS [pytest arguments...] [ipyparallel/tests/test_X.py...]
#
# TESTS is a copy of ipyparallel/tests from IPython Parallel's repository
# (tag 9.1.0), or of the repository itself; it is not fetched here. The
# suite's files run unchanged, except its tests/__init__.py, which starts
# ipcontroller and ipengine: scripts/ipp-suite/fixtures.py stands in for it
# and starts a ztask cluster. `import ipyparallel` finds ztask.compat through
# a one-line stand-in package. The engines see the same path as the tests
# (cloudpickle sends the tests' module-level functions by reference).
# At the end it prints how many tests of the public API pass
# (scripts/ipp-suite/count.py; machinery.txt lists the tests of IPython
# Parallel's own machinery, left out, each with why).
#
# One way to get the tests: git clone https://github.com/ipython/ipyparallel
# /tmp/ipp && git -C /tmp/ipp checkout 9.1.0; then scripts/ipp-suite.sh /tmp/ipp
#
# Needs the build (ZTASK_BIN_DIR, default build/bin) and Debian's
# python3-ipython python3-ipykernel python3-jupyter-client python3-traitlets
# python3-tornado python3-pytest-timeout python3-pytest-asyncio
# python3-psutil python3-joblib python3-numpy python3-decorator
# (python3-matplotlib for two tests): it installs those that are missing
# (scripts/install-deps.sh ipp).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
[ $# -ge 1 ] || { sed -n '4,5p' "$0" >&2; exit 2; }
"$root/scripts/install-deps.sh" ipp
tests=$1; shift
[ -d "$tests/ipyparallel/tests" ] && tests=$tests/ipyparallel/tests
[ -f "$tests/clienttest.py" ] || { echo "no IPython Parallel tests in $tests" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ztask-ipp-suite.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ipyparallel"
echo 'import ztask.compat; ztask.compat.install_as(__name__, __path__)' > "$work/ipyparallel/__init__.py"
cp -r "$tests" "$work/ipyparallel/tests"
rm -rf "$work/ipyparallel/tests/__pycache__"
cp "$here/ipp-suite/fixtures.py" "$work/ipyparallel/tests/__init__.py"

export ZTASK_BIN_DIR="${ZTASK_BIN_DIR:-$root/build/bin}"
# ZTASK_PYTHON_DIR: another copy of the package to judge (default: python/).
export PYTHONPATH="$work:${ZTASK_PYTHON_DIR:-$root/python}${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
cd "$work"
# Whole suite unless files of it are named (ipyparallel/tests/test_view.py...).
default="$work/ipyparallel/tests"
for arg in "$@"; do case $arg in ipyparallel/tests*) default= ;; esac; done
set +e
/usr/bin/python3 -m pytest -p no:cacheprovider --rootdir "$work" -o addopts= -o asyncio_mode=auto \
    --continue-on-collection-errors --junitxml "$work/report.xml" \
    --timeout "${IPP_SUITE_TIMEOUT:-60}" $default "$@"
status=$?
# The figure that judges: the public API's tests (scripts/ipp-suite/machinery.txt
# lists those of IPython Parallel's own machinery, left out).
[ -f "$work/report.xml" ] && /usr/bin/python3 "$here/ipp-suite/count.py" "$work/report.xml" "$here/ipp-suite/machinery.txt"
exit $status
