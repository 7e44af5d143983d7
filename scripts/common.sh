# Shared by scripts/lab and scripts/test: install what is missing, then configure and build.
# Sourced, not run.

ARL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ARL_PRESET="${ARL_PRESET:-dev}"
ARL_BUILD_DIR="$ARL_ROOT/build/$ARL_PRESET"
ARL_JOBS="${ARL_JOBS:-$(nproc 2>/dev/null || echo 2)}"

# Debian 12 packages the build, the tests and the benchmarks need.
ARL_PACKAGES=(
  build-essential cmake pkg-config ninja-build
  libgtest-dev libgmock-dev libbenchmark-dev
  libzmq3-dev cppzmq-dev libsodium-dev libprotobuf-dev protobuf-compiler
  qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev libxkbcommon-dev
  xvfb xauth fonts-dejavu-core poppler-utils
  openmpi-bin libopenmpi-dev
  clang-format clang-tidy
  clang-14 libclang-rt-14-dev
  libcli11-dev nlohmann-json3-dev libeigen3-dev
  desktop-file-utils appstream
  iproute2
)

# Installed when the archive has them; the build goes on without them. libgloo-dev: Gloo's
# collectives (core/engines/gloo, gloo-* algorithms); without it CMake builds no Gloo engine and
# the lab refuses gloo-* with a line that says to install it.
ARL_OPTIONAL_PACKAGES=(libgloo-dev)

# Whether clang 14 and libFuzzer's runtime are here: the fuzz targets (scripts/fuzz) need both.
arl_have_libfuzzer() {
  command -v clang++-14 >/dev/null 2>&1 || return 1
  [ -f "$(clang++-14 -print-resource-dir 2>/dev/null)/lib/linux/libclang_rt.fuzzer-x86_64.a" ]
}

arl_installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

arl_missing_packages() {
  local missing=() p
  for p in "${ARL_PACKAGES[@]}"; do
    arl_installed "$p" || missing+=("$p")
  done
  for p in "${ARL_OPTIONAL_PACKAGES[@]}"; do
    arl_installed "$p" && continue
    # apt-cache policy prints a candidate only for a package the archive has.
    if apt-cache policy "$p" 2>/dev/null | grep -q "Candidate: [0-9]"; then
      missing+=("$p")
    else
      echo "==> $p is not in this system's archive: building without it" >&2
    fi
  done
  echo "${missing[@]}"
}

arl_install_deps() {
  local missing
  missing="$(arl_missing_packages)"
  [ -z "$missing" ] && return 0
  local cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=300 $missing"
  if [ "$(id -u)" -eq 0 ]; then
    echo "==> installing missing packages: $missing" >&2
    apt-get update -q >&2 || return 1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      -o DPkg::Lock::Timeout=300 $missing >&2 || return 1
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    echo "==> installing missing packages with sudo: $missing" >&2
    sudo apt-get update -q >&2 || return 1
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      -o DPkg::Lock::Timeout=300 $missing >&2 || return 1
  else
    echo "error: these Debian packages are missing: $missing" >&2
    echo "install them as root with:" >&2
    echo "  $cmd" >&2
    return 1
  fi
}

arl_build() {
  local generator=()
  # Reuse whatever generator an existing build tree was made with.
  if [ ! -f "$ARL_BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
    generator=(-G Ninja)
  fi
  echo "==> configuring ($ARL_PRESET) in $ARL_BUILD_DIR" >&2
  cmake --preset "$ARL_PRESET" -S "$ARL_ROOT" "${generator[@]}" >&2 || return 1
  echo "==> building with $ARL_JOBS jobs" >&2
  cmake --build "$ARL_BUILD_DIR" -j "$ARL_JOBS" >&2 || return 1
}
