# Shared by scripts/demo and scripts/test: install what the project needs
# from Debian (as root, or through sudo) and check the Swift toolchain.

# The Debian 12 packages the build and the tests need.
# (libsndfile, libsoxr, libebur128 and libmp3lame: the voice-pack builder, soundboxctl voice build.)
SOUNDBOX_PACKAGES=(libasound2-dev libmosquitto-dev libmpg123-dev libgpiod-dev libsqlite3-dev libssl-dev alsa-utils
  libsndfile1-dev libsoxr-dev libebur128-dev libmp3lame-dev)

soundbox_install_packages() {
  local missing=()
  for p in "${SOUNDBOX_PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  echo "Installing: ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

soundbox_check_swift() {
  if ! command -v swift >/dev/null; then
    for d in /opt/swift/usr/bin /usr/share/swift/usr/bin; do
      [ -x "$d/swift" ] && export PATH="$d:$PATH" && break
    done
  fi
  command -v swift >/dev/null || {
    echo "Swift 6 is needed (swift.org toolchain for Debian 12, e.g. unpacked in /opt/swift)." >&2
    exit 1
  }
}
