#!/usr/bin/env bash
# Installs the build into a temporary prefix with `cmake --install`, checks
# that nothing installed points back into the build or source tree, builds a
# user's project out of tree against the prefix (with CMake: find_package, the
# shared and static client and the engine library; and with pkg-config), and
# runs it against a cluster started from the installed programs, with an
# engine binary of the user's own. Also: every installed program answers
# --version with the project's version, and the installed Python package has
# that version and runs a Python function on the installed engines.
# usage: check-install.sh BUILD_DIR SOURCE_DIR VERSION ABI_VERSION (the SONAME's number)
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
version=$3
abi=$4
tmp=$(mktemp -d)
prefix=$tmp/prefix
profile=$tmp/profile
fail() { echo "check-install: $*" >&2; exit 1; }
cleanup() {
  [ -x "$prefix/bin/taskcluster" ] && "$prefix/bin/taskcluster" stop --profile-dir "$profile" \
    >/dev/null 2>&1 || true
  jobs -p | xargs -r kill 2>/dev/null || true
  pkill -f -- "--profile-dir $tmp/service-profile" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || {
  cat "$tmp/install.log"; fail "cmake --install failed"; }
for p in taskhub taskscheduler taskcontroller taskengine taskctl taskcluster taskdash; do
  [ -x "$prefix/bin/$p" ] || fail "no program bin/$p"
  [ -s "$prefix/share/man/man1/$p.1.gz" ] || fail "no man page for $p"
  [ -s "$prefix/share/bash-completion/completions/$p" ] || fail "no completion for $p"
  line=$("$prefix/bin/$p" --version)
  [[ "$line" == "$p $version (protocol ZTASK3)" ]] || fail "$p --version says '$line'"
done
libdir=$(dirname "$(find "$prefix" -name libztask_client.so -print -quit)")
for lib in libztask_client libztask_engine; do
  [ -f "$libdir/$lib.a" ] || fail "no static $lib.a"
  soname=$(readelf -d "$libdir/$lib.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$soname" = "$lib.so.$abi" ] || fail "$lib.so has SONAME '$soname'"
  [ -f "$libdir/$lib.so.$version" ] || fail "no $lib.so.$version"
done
for f in ztask/client.h ztask/engine.h ztask/version.h; do
  [ -f "$prefix/include/$f" ] || fail "no header include/$f"
done
[ -f "$libdir/cmake/ztask/ztaskConfig.cmake" ] || fail "no ztaskConfig.cmake"
[ -f "$libdir/cmake/ztask/ztaskConfigVersion.cmake" ] || fail "no ztaskConfigVersion.cmake"
for unit in taskhub.service taskscheduler.service taskengine@.service; do
  grep -q "^ExecStart=$prefix/bin/" "$prefix/lib/systemd/system/$unit" ||
    fail "$unit does not start a program of $prefix/bin"
done

# Nothing installed may name the build or the source tree: no text file, no
# run path, and no byte of a program or library outside its debug sections
# (which say where it was compiled, as every unstripped binary does).
while IFS= read -r -d '' f; do
  if file -b "$f" | grep '^ELF' >/dev/null; then
    if readelf -d "$f" 2>/dev/null | grep -E '\((RPATH|RUNPATH)\)' | grep -E "$build|$src" >/dev/null; then
      fail "$f has a run path into the build or source tree"
    fi
    case "$f" in *.a) continue ;; esac
    objcopy --strip-debug "$f" "$tmp/stripped"
    ! grep -qaF -e "$build" -e "$src" "$tmp/stripped" || fail "$f names the build or source tree"
  elif file -b "$f" | grep 'ar archive' >/dev/null; then
    continue
  else
    ! grep -qF -e "$build" -e "$src" "$f" || fail "$f names the build or source tree"
  fi
done < <(find "$prefix" -type f -print0)
[ -z "$(find "$prefix" -type l -lname "$src*" -o -type l -lname "$build*")" ] ||
  fail "a symbolic link into the build or source tree was installed"

# A user's project, out of tree: CMake.
consumer=$tmp/consumer-cmake
cmake -S "$src/tests/package/consumer" -B "$consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$tmp/consumer.log" 2>&1 || {
  cat "$tmp/consumer.log"; fail "the consumer project does not configure"; }
cmake --build "$consumer" -j2 >>"$tmp/consumer.log" 2>&1 || {
  cat "$tmp/consumer.log"; fail "the consumer project does not build"; }
# The same with pkg-config.
pc=$tmp/consumer-pc
mkdir -p "$pc"
export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --modversion ztask)" = "$version" ] || fail "pkg-config says ztask $(pkg-config --modversion ztask)"
c++ -o "$pc/client" "$src/tests/package/consumer/client.cc" $(pkg-config --cflags --libs ztask) \
  -Wl,-rpath,"$(pkg-config --variable=libdir ztask)" || fail "the pkg-config client does not build"
c++ -o "$pc/engine" "$src/tests/package/consumer/engine.cc" \
  $(pkg-config --cflags --libs ztask-engine) -Wl,-rpath,"$(pkg-config --variable=libdir ztask-engine)" ||
  fail "the pkg-config engine does not build"
ldd "$consumer/consumer_client" | grep "libztask_client.so.$abi => $libdir/" >/dev/null ||
  fail "consumer_client is not linked with the installed shared library"
! ldd "$consumer/consumer_client_static" | grep libztask_client >/dev/null ||
  fail "consumer_client_static is linked with the shared library"

# A cluster from the installed programs, and the user's engines beside it.
"$prefix/bin/taskcluster" start --profile-dir "$profile" -n 1 --daemonize >"$tmp/start.log" 2>&1 || {
  cat "$tmp/start.log"; fail "taskcluster start from the prefix failed"; }
run_pair() {  # ENGINE CLIENT NAME
  "$1" --profile-dir "$profile" --name "$3" >"$tmp/$3.log" 2>&1 &
  local engine_pid=$!
  local out
  out=$("$2" "$profile" "$3") || { cat "$tmp/$3.log"; fail "$2 failed against $1"; }
  echo "$out"
  [[ "$out" == "consumer $version: square=49 sum=6 echo=graph done"* ]] || fail "$2 printed '$out'"
  kill "$engine_pid"
  wait "$engine_pid" 2>/dev/null || true
  # Its engine is gone from the hub before the next one registers.
  for _ in $(seq 100); do
    "$prefix/bin/taskctl" engines --profile-dir "$profile" | grep "$3" >/dev/null || return 0
    sleep 0.1
  done
  fail "engine $3 still listed after it stopped"
}
run_pair "$consumer/consumer_engine" "$consumer/consumer_client" cmake-engine
run_pair "$consumer/consumer_engine" "$consumer/consumer_client_static" cmake-engine-2
run_pair "$pc/engine" "$pc/client" pc-engine

# The installed Python package: its version, and a function on the engines.
out=$(PYTHONPATH="$prefix/lib/python3/dist-packages" ZTASK_PROFILE_DIR="$profile" /usr/bin/python3 -c '
import ztask, sys
c = ztask.Client()
print(ztask.__version__, c.submit(pow, 2, 10).result(timeout=60), ztask.__file__)
c.close()
') || fail "the installed Python package failed"
[[ "$out" == "$version 1024 $prefix/lib/python3/dist-packages/ztask/__init__.py" ]] ||
  fail "the installed Python package printed '$out'"
"$prefix/bin/taskctl" submit --profile-dir "$profile" --wait -- echo installed >"$tmp/submit.log" ||
  { cat "$tmp/submit.log"; fail "taskctl submit from the prefix failed"; }
"$prefix/bin/taskcluster" stop --profile-dir "$profile" >/dev/null

# The systemd units: systemd's own check where it is installed, then their
# ExecStart lines run as systemd would run them (the profile as
# StateDirectory makes it), and a task through the cluster they make.
units=$prefix/lib/systemd/system
cp "$units/taskengine@.service" "$tmp/taskengine@1.service"
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify --man=no "$units/taskhub.service" "$units/taskscheduler.service" \
    "$tmp/taskengine@1.service" || fail "systemd-analyze verify refuses the units"
else
  echo "check-install: no systemd-analyze here; the units are only run, not verified"
fi
service_profile=$tmp/service-profile
mkdir -m 700 "$service_profile"
exec_start() {  # UNIT: its ExecStart line as argv, with systemd's substitutions made
  sed -n 's/^ExecStart=//p' "$1" | sed -e "s|\${ZTASK_PROFILE_DIR}|$service_profile|g" \
    -e "s|%H|$(hostname)|g" -e 's|%i|1|g' -e 's|\$TASK[A-Z]*_ARGS||g'
}
restart_on_failure() {  # ARGV...: as the units' Restart=on-failure, RestartSec=1
  until "$@"; do sleep 1; done
}
service_pids=()
for unit in "$units/taskhub.service" "$units/taskscheduler.service" "$tmp/taskengine@1.service"; do
  read -r -a argv <<<"$(exec_start "$unit")"
  [ -x "${argv[0]}" ] || fail "$(basename "$unit") starts ${argv[0]}, not a program"
  restart_on_failure "${argv[@]}" >>"$tmp/$(basename "$unit").log" 2>&1 &
  service_pids+=($!)
done
# Until the scheduler has added its endpoint, a client is told to come back.
ready=0
for _ in $(seq 300); do
  if "$prefix/bin/taskctl" wait-engines --profile-dir "$service_profile" --timeout 30 1 \
      >/dev/null 2>&1; then
    ready=1
    break
  fi
  sleep 0.1
done
[ "$ready" = 1 ] || { cat "$tmp"/*.service.log; fail "the units' engine never registered"; }
out=$("$prefix/bin/taskctl" submit --profile-dir "$service_profile" --wait --wait-timeout 60 \
  -- echo from the units) || { cat "$tmp"/*.service.log; fail "no task ran on the units' cluster"; }
grep -q "from the units" <<<"$out" || fail "the units' cluster ran the task wrongly: $out"
kill "${service_pids[@]}"
pkill -f -- "--profile-dir $service_profile" || true
wait "${service_pids[@]}" 2>/dev/null || true
echo "check-install: the prefix is complete and self-contained; CMake and pkg-config consumers ran"
