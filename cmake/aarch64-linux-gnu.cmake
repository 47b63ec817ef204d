# Cross-compiling for 64-bit ARM with Debian's g++-aarch64-linux-gnu, against a sysroot of
# Debian's arm64 packages unpacked by scripts/test-arm.sh (GATEDLM_ARM_SYSROOT).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(GATEDLM_ARM_SYSROOT "$ENV{GATEDLM_ARM_SYSROOT}" CACHE PATH "unpacked arm64 packages")
# Libraries and their CMake/pkg-config files come from the sysroot and the cross
# toolchain's own tree; programs (cmake, ninja, pkg-config) from the host.
set(CMAKE_FIND_ROOT_PATH ${GATEDLM_ARM_SYSROOT} /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} "${GATEDLM_ARM_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${GATEDLM_ARM_SYSROOT}")
# The arm64 libraries link against each other by their sysroot paths.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${GATEDLM_ARM_SYSROOT}/usr/lib/aarch64-linux-gnu")
# Programs built here run under qemu-user (gtest_discover_tests lists the tests that way).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu
    -E LD_LIBRARY_PATH=${GATEDLM_ARM_SYSROOT}/usr/lib/aarch64-linux-gnu -E GOMP_SPINCOUNT=10000)
