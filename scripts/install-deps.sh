#!/usr/bin/env bash
# Installs, from Debian's package archive and only when missing, every package
# that ztask's build, tests and examples need. Safe to run again: it does
# nothing when everything is present.
# usage: scripts/install-deps.sh [fuzz|bench|ipp]   (also clang and libFuzzer, the
# benchmark peers IPython Parallel and Dask, or what IPython Parallel's own test
# suite needs to run against ztask.compat)
set -euo pipefail

packages=(
  build-essential g++ cmake pkg-config ccache
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libboost-graph-dev
  libsodium-dev libssl-dev libsqlite3-dev nlohmann-json3-dev libcli11-dev libspdlog-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  libtcmalloc-minimal4
  openmpi-bin openssh-client openssh-server slurm-wlm munge
  python3-zmq python3-msgpack python3-cloudpickle python3-pytest python3-tqdm python3-venv
  libcivetweb-dev chromium chromium-driver python3-selenium python3-prometheus-client
  help2man dpkg-dev file
  iproute2
  python3-ipython python3-joblib python3-distributed
  python3-matplotlib
)
case "${1:-}" in
  fuzz) packages+=(clang libclang-rt-14-dev) ;;             # scripts/fuzz.sh
  bench) packages+=(python3-ipyparallel) ;;  # bench/compare.sh
  ipp) packages+=(python3-ipython python3-ipykernel python3-jupyter-client python3-traitlets
                  python3-tornado python3-pytest-timeout python3-pytest-asyncio python3-psutil
                  python3-joblib python3-numpy python3-decorator python3-matplotlib) ;;  # scripts/ipp-suite.sh
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
