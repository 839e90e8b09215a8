#!/usr/bin/env bash
# Installs iox for C and C++ programs under PREFIX:
#   scripts/install-c.sh PREFIX
# builds libiox_ffi (cargo build --release -p iox_ffi) and writes
#   PREFIX/lib/libiox_ffi.so, PREFIX/lib/libiox_ffi.a,
#   PREFIX/include/iox/iox.h, PREFIX/include/iox/iox.hpp, PREFIX/include/iox/iox_ros2.hpp,
#   PREFIX/include/iox/iox_blackboard.hpp,
#   PREFIX/lib/cmake/iox/ioxConfig.cmake (find_package(iox): targets iox::iox, iox::iox_static),
#   PREFIX/lib/pkgconfig/iox.pc (pkg-config --cflags --libs iox).
#   scripts/install-c.sh --tarball FILE.tar.gz
# writes the same tree into a tarball instead, to unpack anywhere (the CMake and
# pkg-config files find the libraries relative to themselves).
# IOX_FFI_LIB_DIR=DIR installs the libraries already built in DIR instead of building
# (the tests pass cargo's own output directory).
set -euo pipefail
usage() { echo "usage: scripts/install-c.sh PREFIX | --tarball FILE.tar.gz" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
tarball=
if [ "${1:-}" = --tarball ]; then
    [ $# -eq 2 ] || usage
    tarball=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
    stage=$(mktemp -d)
    trap 'rm -rf "$stage"' EXIT
    set -- "$stage/iox"
fi
[ $# -eq 1 ] || usage
mkdir -p "$1"
prefix=$(cd "$1" && pwd)
libs=${IOX_FFI_LIB_DIR:-}
if [ -z "$libs" ]; then
    (cd "$here" && cargo build --release -p iox_ffi)
    libs=$here/target/release
fi
for f in libiox_ffi.so libiox_ffi.a; do
    [ -f "$libs/$f" ] || { echo "install-c: $libs/$f is missing (build iox_ffi first)" >&2; exit 1; }
done
install -d "$prefix/lib/cmake/iox" "$prefix/lib/pkgconfig" "$prefix/include/iox"
install -m 0755 "$libs/libiox_ffi.so" "$prefix/lib/"
install -m 0644 "$libs/libiox_ffi.a" "$prefix/lib/"
install -m 0644 "$here/iox_ffi/include/iox.h" "$here/iox_ffi/include/iox.hpp" "$here/iox_ffi/include/iox_ros2.hpp" \
    "$here/iox_ffi/include/iox_blackboard.hpp" \
    "$prefix/include/iox/"
install -m 0644 "$here/iox_ffi/cmake/ioxConfig.cmake" "$here/iox_ffi/cmake/ioxConfigVersion.cmake" "$prefix/lib/cmake/iox/"
# The prefix relative to the file itself, so an unpacked tarball works where it lies.
cat > "$prefix/lib/pkgconfig/iox.pc" <<'PC'
prefix=${pcfiledir}/../..
libdir=${prefix}/lib
includedir=${prefix}/include/iox

Name: iox
Description: Brokerless zero-copy shared-memory IPC (C API; C++17 layer in iox.hpp)
Version: 0.1.0
Libs: -L${libdir} -Wl,-rpath,${libdir} -liox_ffi
Libs.private: -lpthread -ldl -lm -lrt
Cflags: -I${includedir}
PC
if [ -n "$tarball" ]; then
    tar -czf "$tarball" -C "$(dirname "$prefix")" iox
    echo "wrote $tarball (unpack it anywhere: DIR/iox is the prefix)"
    exit 0
fi
echo "installed iox under $prefix (find_package(iox) with CMAKE_PREFIX_PATH=$prefix; PKG_CONFIG_PATH=$prefix/lib/pkgconfig)"
