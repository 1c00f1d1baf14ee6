# Shared by image/build-deb and the device tests: the trixie build root,
# the arm64 sysroot, and running commands in the build root. Sourced with
# $repo set. Everything is cached in $SOUNDBOX_DEVICE_CACHE, keyed by the
# package lists, so changing a list makes a new one (and drops the old).
# It brings scripts/lib.sh along (installing packages, checks, --help).
# shellcheck disable=SC2154 source=scripts/lib.sh  # repo: set by the caller
source "$repo/scripts/lib.sh"

device_cache=${SOUNDBOX_DEVICE_CACHE:-$repo/.cache/device}
device_suite=trixie
device_mirror=${SOUNDBOX_DEBIAN_MIRROR:-http://deb.debian.org/debian}

die() { echo "device: $*" >&2; exit 1; }
step() { echo "device: $* ($((SECONDS)) s)" >&2; }

# The Debian packages this machine needs to make roots and run arm64 code.
device_host_tools() { soundbox_apt_install step mmdebstrap qemu-user-static rsync; }

# device_cached NAME KEY: the path of a cached tree NAME-KEY; older NAME-*
# trees are removed. Prints the path; the caller makes it if missing.
device_cached() {
  local name=$1 key=$2 path
  mkdir -p "$device_cache"
  path=$device_cache/$name-$key
  for old in "$device_cache/$name"-*; do
    [ -e "$old" ] && [ "$old" != "$path" ] && [ "${old%.tmp}" = "$old" ] && device_remove_tree "$old"
  done
  echo "$path"
}

# Everything mounted below a tree, deepest first.
device_unmount_all() {
  awk -v p="$(readlink -f "$1")" '$2 == p || index($2, p "/") == 1 { print $2 }' /proc/self/mounts | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
}

# device_remove_tree DIR: removes a tree that a killed mmdebstrap may have
# left with /proc, /sys and /dev/pts still mounted in it (seen: a run ended
# early, its background base build stopped; the next run's rm -rf went
# into the mounted /sys and failed, and so did its build): unmounted
# first, and rm never leaves the tree's file system.
device_remove_tree() {
  [ -e "$1" ] || return 0
  device_unmount_all "$1"
  rm -rf --one-file-system "$1"
}

# The trixie amd64 build root: trixie's Swift, the -dev libraries, dpkg-dev,
# lintian, and cross binutils to read arm64 binaries. Prints its path.
device_build_packages=(swiftlang libstdc++-14-dev libasound2-dev libmosquitto-dev libmpg123-dev libgpiod-dev
  libsqlite3-dev libssl-dev libsndfile1-dev libsoxr-dev libebur128-dev libmp3lame-dev
  dpkg-dev lintian binutils-aarch64-linux-gnu man-db ca-certificates)
device_build_root() {
  local key root
  key=$(echo "$device_suite ${device_build_packages[*]}" | sha256sum | cut -c1-12)
  root=$(device_cached "root-$device_suite-amd64" "$key")
  if [ ! -d "$root" ]; then
    step "making the $device_suite amd64 build root (once; about a minute)"
    device_remove_tree "$root.tmp"
    mmdebstrap --quiet --variant=apt --include="$(IFS=,; echo "${device_build_packages[*]}")" \
      "$device_suite" "$root.tmp" "$device_mirror" >&2
    mv "$root.tmp" "$root"
  fi
  echo "$root"
}

# The arm64 sysroot to cross-build against, made without running arm64
# code: the -dev libraries and the Swift runtime unpacked (mmdebstrap's
# extract variant), the merged-/usr links the extract variant leaves out,
# the aarch64 Swift resources from trixie's swiftlang_arm64 .deb, and a
# dpkg database written from the unpacked .debs so that dpkg-shlibdeps
# can name the packages (its file lists carry the /sysroot/arm64 prefix the
# sysroot has inside the build root). Prints its path.
device_sysroot_packages=(libc6-dev libstdc++-14-dev libgcc-14-dev libasound2-dev libmosquitto-dev libmpg123-dev
  libgpiod-dev libsqlite3-dev libswiftlang libssl-dev zlib1g-dev libzstd-dev
  libsndfile1-dev libsoxr-dev libebur128-dev libmp3lame-dev)
device_arm64_sysroot() {
  local key s
  key=$(echo "$device_suite ${device_sysroot_packages[*]} admindir-v2" | sha256sum | cut -c1-12)
  s=$(device_cached "sysroot-$device_suite-arm64" "$key")
  [ -d "$s" ] && { echo "$s"; return; }
  step "making the $device_suite arm64 sysroot (once)"
  device_remove_tree "$s.tmp"
  mmdebstrap --quiet --variant=extract --arch=arm64 --skip=cleanup/apt/cache --skip=cleanup/apt/lists \
    --include="$(IFS=,; echo "${device_sysroot_packages[*]}")" "$device_suite" "$s.tmp" "$device_mirror" >&2
  local t=$s.tmp
  # The aarch64 stdlib modules, static runtime and clang headers (not in libswiftlang).
  mkdir -p "$t/var/cache/soundbox"
  (cd "$t/var/cache/soundbox" && apt-get -qq -o Dir="$t" -o Dir::State::Status="$t/var/lib/dpkg/status" \
     -o APT::Architecture=arm64 -o APT::Architectures::=arm64 download swiftlang >&2 2>/dev/null)
  dpkg-deb --fsys-tarfile "$t"/var/cache/soundbox/swiftlang_*_arm64.deb | tar -x -C "$t" --wildcards \
    './usr/libexec/swift/lib/swift/linux/*' './usr/libexec/swift/lib/swift/shims/*' './usr/libexec/swift/lib/swift/clang' \
    './usr/libexec/swift/lib/clang/*' './usr/libexec/swift/lib/swift_static/*'
  rm -f "$t"/var/cache/soundbox/swiftlang_*_arm64.deb
  for d in lib bin sbin; do [ -e "$t/$d" ] || ln -s "usr/$d" "$t/$d"; done
  device_admindir "$t" /sysroot/arm64
  rm -f "$t"/var/cache/apt/archives/*.deb
  mv "$t" "$s"
  echo "$s"
}

# device_admindir TREE PREFIX: TREE/var/lib/dpkg from the .debs in
# TREE/var/cache/apt/archives, file lists prefixed with PREFIX.
device_admindir() {
  local t=$1 prefix=$2 a=$1/var/lib/dpkg tmp deb pkg arch ma name
  mkdir -p "$a/info" "$a/updates"
  echo arm64 > "$a/arch"
  echo 1 > "$a/info/format"   # the multiarch layout: info/<pkg>:<arch>.list
  : > "$a/status"
  tmp=$(mktemp -d)
  for deb in "$t"/var/cache/apt/archives/*.deb; do
    pkg=$(dpkg-deb -f "$deb" Package); arch=$(dpkg-deb -f "$deb" Architecture); ma=$(dpkg-deb -f "$deb" Multi-Arch)
    name=$pkg; [ "$ma" = same ] && name=$pkg:$arch
    { dpkg-deb -f "$deb" | grep -v '^Status:'; echo "Status: install ok installed"; echo; } >> "$a/status"
    dpkg-deb -c "$deb" | awk -v p="$prefix" '{ for (i = 1; i <= 5; i++) $i = ""; sub(/^ +/, ""); sub(/ -> .*/, "");
      sub(/^\./, ""); sub(/\/$/, ""); if ($0 != "") print p $0 }' > "$a/info/$name.list"
    rm -rf "${tmp:?}"/*
    dpkg-deb -e "$deb" "$tmp"
    for f in shlibs symbols; do [ -f "$tmp/$f" ] && cp "$tmp/$f" "$a/info/$name.$f"; done
  done
  rm -rf "$tmp"
}

# The Swift SDK bundle for the arm64 cross build, as seen inside the build
# root (sysroot at /sysroot/arm64, linked with trixie's lld).
device_sdk_bundle() {
  local b=$device_cache/sdks/trixie-arm64.artifactbundle v
  v=$b/aarch64-unknown-linux-gnu
  mkdir -p "$v"
  cat > "$b/info.json" <<'EOF'
{"schemaVersion": "1.0", "artifacts": {"trixie-arm64": {"type": "swiftSDK", "version": "6.0.3",
  "variants": [{"path": "aarch64-unknown-linux-gnu", "supportedTriples": ["x86_64-unknown-linux-gnu", "x86_64-pc-linux-gnu"]}]}}}
EOF
  cat > "$v/swift-sdk.json" <<'EOF'
{"schemaVersion": "4.0", "targetTriples": {"aarch64-unknown-linux-gnu": {"sdkRootPath": "/sysroot/arm64",
  "swiftResourcesPath": "/sysroot/arm64/usr/libexec/swift/lib/swift",
  "swiftStaticResourcesPath": "/sysroot/arm64/usr/libexec/swift/lib/swift_static", "toolsetPaths": ["toolset.json"]}}}
EOF
  cat > "$v/toolset.json" <<'EOF'
{"schemaVersion": "1.0", "swiftCompiler": {"extraCLIOptions": ["-use-ld=lld"]}, "linker": {"path": "/usr/libexec/swift/bin/ld.lld"}}
EOF
}

# device_enter ROOT SYSROOT OUT: mounts what builds in ROOT need: /proc,
# the checkout's copy (read-only) at /src, the build folders at /build, OUT
# at /out, the arm64 sysroot (read-only) at /sysroot/arm64, the SDK at /sdks.
device_mounts=()
device_bind() {   # SRC DST [ro]
  mkdir -p "$2"
  mount --bind "$1" "$2"
  device_mounts+=("$2")   # before the remount: device_leave undoes a failed one too
  if [ "${3:-}" = ro ]; then mount -o remount,bind,ro "$2"; fi
}
# device_sources: the checkout copied to $device_cache/src, where a file
# whose bytes did not change since the last build keeps its inode and time
# (rsync by checksum, times not copied). SwiftPM decides what to rebuild by
# those: from the checkout itself, a fresh clone (CI's, every run) would
# rebuild everything, ~3 minutes.
device_sources() {
  local cache checkout inside=()
  mkdir -p "$device_cache/src"
  # (a cache inside the checkout is left out too: else each run would copy the copy)
  cache=$(cd "$device_cache" && pwd -P) checkout=$(cd "$repo" && pwd -P)
  case "$cache/" in "$checkout/"*) inside=(--exclude="/${cache#"$checkout/"}") ;; esac
  rsync -r -l -p -c --delete --exclude=/.git --exclude=/.build --exclude=/.swiftpm --exclude=/.cache \
    --exclude=/out "${inside[@]}" "$repo/" "$device_cache/src/"
}
device_enter() {
  local root=$1 sysroot=$2 out=$3
  device_sdk_bundle
  mkdir -p "$device_cache/build"
  mkdir -p "$root/proc" && mount -t proc proc "$root/proc" && device_mounts+=("$root/proc")
  device_sources
  device_bind "$device_cache/src" "$root/src" ro
  device_bind "$device_cache/build" "$root/build"
  device_bind "$out" "$root/out"
  device_bind "$device_cache/sdks" "$root/sdks" ro
  [ -n "$sysroot" ] && device_bind "$sysroot" "$root/sysroot/arm64" ro
  return 0
}
device_leave() {
  local i
  for ((i = ${#device_mounts[@]} - 1; i >= 0; i--)); do umount -l "${device_mounts[$i]}" 2>/dev/null || true; done
  device_mounts=()
}

# device_run ROOT COMMAND...: runs COMMAND in ROOT with a clean environment.
device_run() {
  local root=$1; shift
  local epoch
  epoch=$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/bin:/bin:/usr/sbin:/sbin LANG=C.UTF-8 \
    SOURCE_DATE_EPOCH="$epoch" "$@"
}

# Keeps a build's output short: errors, warnings from our sources, the result.
device_quiet() {
  grep -E --line-buffered 'error:|^/src/.*warning:|Build complete|Compiling .* failed' || true
}

# update_keys: the folder with the update bundles' development keys, made
# once: ca.crt (the keyring image/build puts on the box), signer.crt and
# signer.key (what image/build-bundle signs with). ECDSA P-256: RAUC's CMS
# signatures verify it with OpenSSL's defaults (smimesign purpose: the
# signer has no extended key usage), and its keys and signatures are small.
# A vendor passes its own (image/build --keyring, image/build-bundle --cert
# --key); $SOUNDBOX_UPDATE_KEYS moves this folder (default out/keys).
update_keys() {
  local k=${SOUNDBOX_UPDATE_KEYS:-$repo/out/keys}
  if [ ! -s "$k/signer.crt" ]; then
    mkdir -p "$k" && chmod 0700 "$k"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
      -subj "/O=Soundbox development/CN=Soundbox development update CA" \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
      -keyout "$k/ca.key" -out "$k/ca.crt" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -subj "/O=Soundbox development/CN=Soundbox development bundle signer" \
      -keyout "$k/signer.key" -out "$k/signer.csr" 2>/dev/null
    openssl x509 -req -in "$k/signer.csr" -CA "$k/ca.crt" -CAkey "$k/ca.key" -CAcreateserial -days 3650 \
      -extfile <(printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n') \
      -out "$k/signer.crt" 2>/dev/null
    rm -f "$k/signer.csr"
    [ -s "$k/signer.crt" ] || die "could not make the development update keys in $k"
    step "made development update keys in $k (a vendor passes its own)"
  fi
  echo "$k"
}

# rpi_firmware_partition SELECTOR TRYBOOT: the boot partition the Raspberry
# Pi 4 firmware starts, played from autoboot.txt on SELECTOR (an mtools
# image spec): its [tryboot] section's boot_partition when the one-shot
# tryboot flag is set (TRYBOOT 1), else [all]'s. Used by the tests, which
# cannot run the firmware (image/README.md says what is simulated).
rpi_firmware_partition() {
  local text want part
  text=$(MTOOLS_SKIP_CHECK=1 mtype -i "$1" ::/autoboot.txt | tr -d '\r') || return 1
  want='[all]'; [ "$2" = 1 ] && want='[tryboot]'
  part=$(awk -v want="$want" '/^\[/ { s = $0 } s == want && /^boot_partition=/ { sub(/.*=/, ""); print }' <<<"$text")
  [ -n "$part" ] || part=$(awk '/^\[/ { s = $0 } s == "[all]" && /^boot_partition=/ { sub(/.*=/, ""); print }' <<<"$text")
  echo "${part:-1}"
}

# rpi_tryboot_module KVER: builds board/tryboot (soundbox-tryboot.ko) for
# Debian's arm64 kernel KVER and prints its path. Cross-built in a small
# cached trixie amd64 root: the cross compiler, the kernel's own kbuild
# tools, and that kernel's arm64 headers unpacked (their dependencies, the
# arm64 image and compiler, are not needed to build a module). Cached by
# KVER and the module's source.
rpi_tryboot_module() {
  local kver=$1 key kroot out
  key=$(cat "$repo/board/tryboot/"* | { cat; echo "$device_suite $kver v1"; } | sha256sum | cut -c1-12)
  kroot=$(device_cached "kmod-$device_suite-amd64" "$(echo "$device_suite $kver v1" | sha256sum | cut -c1-12)")
  if [ ! -d "$kroot" ]; then
    step "making the module build root for $kver (once)"
    device_remove_tree "$kroot.tmp"
    mmdebstrap --quiet --variant=minbase --architectures=amd64,arm64 \
      --include="make,gcc-aarch64-linux-gnu,libc6-dev-arm64-cross,linux-kbuild-${kver%-arm64},kmod,bc" \
      --customize-hook="chroot \"\$1\" sh -c 'cd /tmp && apt-get download -qq linux-headers-$kver:arm64 linux-headers-${kver%-arm64}-common'" \
      --customize-hook='for d in "$1"/tmp/linux-headers-*.deb; do dpkg-deb -x "$d" "$1"; done; rm -f "$1"/tmp/*.deb' \
      "$device_suite" "$kroot.tmp" "$device_mirror" >&2 || die "could not make the module build root for $kver"
    mv "$kroot.tmp" "$kroot"
  fi
  out=$kroot/out/$key
  if [ ! -f "$out/soundbox-tryboot.ko" ]; then
    rm -rf "$kroot/build" && mkdir -p "$kroot/build" && cp "$repo/board/tryboot/"* "$kroot/build/"
    chroot "$kroot" make -s -C "/usr/src/linux-headers-$kver" M=/build ARCH=arm64 \
      CROSS_COMPILE=aarch64-linux-gnu- CC=aarch64-linux-gnu-gcc modules >&2 ||
      die "the tryboot module did not build against $kver (the compiler's messages are above)"
    mkdir -p "$out" && cp "$kroot/build/soundbox-tryboot.ko" "$out/"
  fi
  echo "$out/soundbox-tryboot.ko"
}

# deb_with_version DEB VERSION DIR: DEB repacked as VERSION into DIR (the
# update tests' "newer" package: the same files, another version); prints
# the new package's path.
deb_with_version() {
  local t
  t=$(mktemp -d)
  dpkg-deb -R "$1" "$t/p"
  sed -i "s/^Version: .*/Version: $2/" "$t/p/DEBIAN/control"
  mkdir -p "$3"
  dpkg-deb --root-owner-group -Zxz -b "$t/p" "$3/" >/dev/null
  rm -rf "$t"
  ls -t "$3"/*_"$2"_*.deb | head -1
}
