# Sourced by image/build after image/lib.sh: the cached base root
# filesystem of an image, made once with mmdebstrap (maintainer scripts run
# under qemu-user for arm64) and keyed by its package list.

# What every image has, whatever the board. No recommends: each package is
# here for a reason.
image_base_packages=(systemd systemd-sysv udev dbus systemd-timesyncd
  initramfs-tools zstd kmod procps less iproute2 ifupdown dhcpcd-base wpasupplicant
  openssh-server e2fsprogs dosfstools mtools fdisk alsa-utils ca-certificates sqlite3
  rauc rauc-service curl
  libasound2t64 libgpiod3 libmosquitto1 libmpg123-0t64 libsqlite3-0)
# What each board adds: its kernel, firmware and Wi-Fi firmware.
image_board_packages() {   # BOARD
  case "$1" in
    rpi) echo linux-image-arm64 raspi-firmware firmware-brcm80211 ;;
    generic) echo linux-image-amd64 systemd-boot-efi firmware-iwlwifi firmware-realtek ;;
  esac
}
# What the boot test runs inside the guest but the image must not carry:
# downloaded (with their dependencies) next to the base, never installed.
image_testkit_packages=(mosquitto mosquitto-clients)

# image_base BOARD ARCH: prints the path of the cached base, a folder with
# rootfs/ (the installed tree) and testkit/ (.debs for the boot test).
image_base() {
  local board=$1 arch=$2 key base pkgs
  pkgs="${image_base_packages[*]} $(image_board_packages "$board")"
  key=$(echo "$device_suite $arch $pkgs | ${image_testkit_packages[*]} v2" | sha256sum | cut -c1-12)
  base=$(device_cached "base-$device_suite-$board-$arch" "$key")
  [ -d "$base" ] && { echo "$base"; return; }
  step "making the $board $arch base root filesystem (once; ~10 min for arm64 under qemu-user)"
  device_remove_tree "$base.tmp"
  mkdir -p "$base.tmp/testkit"
  # The testkit is downloaded while apt still has its lists (before the
  # cleanup), into a folder outside the tree; only what the image lacks.
  # The initramfs is made once, at the end: while packages are installed
  # update-initramfs is diverted to a no-op (the kernel's postinst and the
  # initramfs-tools trigger would each make one: under qemu-user about a
  # minute and a half apiece).
  mmdebstrap --quiet --variant=minbase --architectures="$arch" --components="main non-free-firmware" \
    --include="$(echo "$pkgs" | tr ' ' ',')" \
    --essential-hook='chroot "$1" dpkg-divert --quiet --local --rename --add /usr/sbin/update-initramfs' \
    --essential-hook='printf "#!/bin/sh\n# soundbox image build: the initramfs is made once, at the end\nexit 0\n" > "$1/usr/sbin/update-initramfs"; chmod 0755 "$1/usr/sbin/update-initramfs"' \
    --customize-hook='rm -f "$1/usr/sbin/update-initramfs"; chroot "$1" dpkg-divert --quiet --local --rename --remove /usr/sbin/update-initramfs' \
    --customize-hook='chroot "$1" update-initramfs -c -k all' \
    --customize-hook="chroot \"\$1\" apt-get clean" \
    --customize-hook="chroot \"\$1\" apt-get install -qq -y --download-only --no-install-recommends ${image_testkit_packages[*]} >/dev/null" \
    --customize-hook="mv \"\$1\"/var/cache/apt/archives/*.deb \"$base.tmp/testkit/\"" \
    "$device_suite" "$base.tmp/rootfs" "$device_mirror" >&2 ||
    die "mmdebstrap could not make the $board $arch base root filesystem (its messages are above)"
  mv "$base.tmp" "$base"
  echo "$base"
}
