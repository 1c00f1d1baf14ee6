# Shared by the host-side scripts (scripts/*, image/*: most of those
# through image/lib.sh): installing Debian packages, the Swift toolchain,
# the checks' PASS/FAIL lines and counts, --help.
# Bash only.

# The Debian 12 packages the build and the tests need.
# (libsndfile, libsoxr, libebur128 and libmp3lame: the voice-pack builder, soundboxctl voice build.)
SOUNDBOX_PACKAGES=(libasound2-dev libmosquitto-dev libmpg123-dev libgpiod-dev libsqlite3-dev libssl-dev alsa-utils
  libsndfile1-dev libsoxr-dev libebur128-dev libmp3lame-dev)

# soundbox_apt_install SAY PACKAGE...: installs those PACKAGEs that are not
# installed (apt-get update first), as root or through sudo. SAY (e.g. step
# or say) is told "installing P..." first. Sets SOUNDBOX_APT_UPDATED=1 when
# it ran apt-get update.
soundbox_apt_install() {
  local say=$1 missing=() p
  shift
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "$say" "installing ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  # shellcheck disable=SC2034  # read by the caller
  SOUNDBOX_APT_UPDATED=1
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# soundbox_install_packages [PACKAGE...]: SOUNDBOX_PACKAGES and PACKAGEs.
soundbox_install_packages() {
  soundbox_apt_install soundbox_installing "${SOUNDBOX_PACKAGES[@]}" "$@"
}
soundbox_installing() { echo "Installing: ${1#installing }"; }

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

# soundbox_help SCRIPT: SCRIPT's header comment (the "#" lines after the
# shebang, up to the first other line), without the "# ".
soundbox_help() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$1"; }

# Checks: one "PASS name (detail)" / "FAIL name: why" line each, counted in
# checks_passed and checks_failed; checks_summary NAME prints the last line,
# "NAME: P passed, F failed" (scripts/test's count reads it).
checks_passed=0 checks_failed=0
pass() { echo "PASS $1${2:+ ($2)}"; checks_passed=$((checks_passed + 1)); }
fail() { echo "FAIL $1: $2"; checks_failed=$((checks_failed + 1)); }
check() {   # check NAME DETAIL COMMAND...: PASS when COMMAND succeeds
  local name=$1 detail=$2
  shift 2
  if "$@"; then pass "$name" "$detail"; else fail "$name" "$detail"; fi
}
# checks_add FILE: counts FILE's PASS and FAIL lines (a guest's results; a
# missing FILE has none). False when it has a FAIL line.
checks_add() {
  local p f
  p=$(grep -c '^PASS ' "$1" 2>/dev/null) || p=0
  f=$(grep -c '^FAIL ' "$1" 2>/dev/null) || f=0
  checks_passed=$((checks_passed + p)) checks_failed=$((checks_failed + f))
  [ "$f" -eq 0 ]
}
# checks_summary NAME: the last line; false when a check failed.
checks_summary() {
  echo "$1: $checks_passed passed, $checks_failed failed"
  [ "$checks_failed" -eq 0 ]
}
