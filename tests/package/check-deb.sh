#!/usr/bin/env bash
# Builds the Debian package with CPack from the build directory, checks its
# control data (run-time dependencies computed from the ELF files) and its
# contents, then runs a cluster from `dpkg -x` of it: taskcluster start,
# taskctl submit, taskcluster stop, all from the extracted tree.
# usage: check-deb.sh BUILD_DIR VERSION
set -euo pipefail
build=$(cd "$1" && pwd)
version=$2
tmp=$(mktemp -d)
root=$tmp/root
profile=$tmp/profile
fail() { echo "check-deb: $*" >&2; exit 1; }
cleanup() {
  [ -x "$root/usr/bin/taskcluster" ] &&
    "$root/usr/bin/taskcluster" stop --profile-dir "$profile" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

(cd "$tmp" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/out" >"$tmp/cpack.log" 2>&1) ||
  { cat "$tmp/cpack.log"; fail "cpack -G DEB failed"; }
deb=$(find "$tmp/out" -maxdepth 1 -name "ztask_${version}_*.deb" -print -quit)
[ -n "$deb" ] || { ls "$tmp/out"; fail "no ztask_${version}_*.deb"; }

info=$(dpkg-deb -I "$deb")
grep -q "^ Package: ztask$" <<<"$info" || fail "the package is not named ztask"
grep -q "^ Version: $version$" <<<"$info" || fail "the package's version is not $version"
depends=$(sed -n 's/^ Depends: //p' <<<"$info")
for lib in libzmq5 libsodium23 libsqlite3-0 libspdlog1.10 libcivetweb1 libstdc++6 libc6; do
  grep -q "$lib" <<<"$depends" || fail "Depends lacks $lib: $depends"
done
grep -q "(>=" <<<"$depends" || fail "Depends has no computed versions: $depends"

contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
for f in ./usr/bin/taskcluster ./usr/bin/taskctl ./usr/bin/taskhub ./usr/bin/taskscheduler \
    ./usr/bin/taskcontroller \
    ./usr/bin/taskengine ./usr/bin/taskdash "./usr/lib/libztask_client.so.$version" \
    "./usr/lib/libztask_engine.so.$version" ./usr/lib/libztask_client.a ./usr/lib/libztask_engine.a \
    ./usr/include/ztask/client.h ./usr/include/ztask/engine.h ./usr/include/ztask/version.h \
    ./usr/lib/cmake/ztask/ztaskConfig.cmake ./usr/lib/cmake/ztask/ztaskTargets.cmake \
    ./usr/lib/pkgconfig/ztask.pc ./usr/lib/pkgconfig/ztask-engine.pc \
    ./usr/share/man/man1/taskctl.1.gz ./usr/share/man/man1/taskcluster.1.gz \
    ./usr/share/bash-completion/completions/taskctl \
    ./usr/share/bash-completion/completions/taskcluster \
    ./usr/lib/systemd/system/taskhub.service ./usr/lib/systemd/system/taskscheduler.service \
    ./usr/lib/systemd/system/taskengine@.service \
    ./usr/lib/python3/dist-packages/ztask/__init__.py ./usr/lib/python3/dist-packages/ztask_worker.py; do
  grep -qxF "$f" <<<"$contents" || fail "the package lacks $f"
done
! grep -q "__pycache__" <<<"$contents" || fail "the package holds __pycache__"
grep -q "^ExecStart=/usr/bin/taskhub " <<<"$(dpkg-deb --fsys-tarfile "$deb" |
  tar -xO ./usr/lib/systemd/system/taskhub.service)" || fail "taskhub.service does not run /usr/bin/taskhub"

dpkg -x "$deb" "$root"
for f in "$root/usr/bin/taskengine" "$root/usr/lib/libztask_client.so.$version" \
    "$root/usr/lib/libztask_client.a"; do
  ! readelf -S "$f" | grep '\.debug_info' >/dev/null || fail "$f keeps its debug sections"
done
[ "$("$root/usr/bin/taskctl" --version)" = "taskctl $version (protocol ZTASK3)" ] ||
  fail "the extracted taskctl does not say its version"
"$root/usr/bin/taskcluster" start --profile-dir "$profile" -n 2 --daemonize >"$tmp/start.log" 2>&1 ||
  { cat "$tmp/start.log"; fail "taskcluster start from the extracted package failed"; }
out=$("$root/usr/bin/taskctl" submit --profile-dir "$profile" --wait -- echo from the package) ||
  fail "taskctl submit from the extracted package failed"
grep -q "from the package" <<<"$out" || fail "the task's record lacks its output: $out"
"$root/usr/bin/taskcluster" stop --profile-dir "$profile" >/dev/null
echo "check-deb: $(basename "$deb") holds what it should; Depends: $depends"
