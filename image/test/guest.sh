#!/bin/bash
# Runs INSIDE the booted image (image/boot-test), as root, from the 9p
# share ("testkit", at /run/testkit), started by a unit the host passes on
# the kernel command line (nothing of the test is written into the image).
# It starts a mosquitto on the guest's loopback (TLS, client certificates:
# the image's provisioned ones), tells systemd it is ready (soundboxd is
# ordered after it), and then, by the mode the host wrote into the share:
#
#   first   checks the provisioning, the daemon, a spoken payment, doctor,
#           SSH, listeners, journal, watchdog; one "PASS name" / "FAIL name:
#           why" line each, "FACT name value" for figures
#   stream  publishes payments, one a second, until the host cuts the power
#   install first the refused bundles (image/test/refused-bundles), each by
#           hand (soundboxctl update install FILE): failed, with the reason,
#           nothing written; then the update bundle as the backend sends it:
#           a signed cmd update over MQTT, downloaded from the guest's own
#           HTTP server (image/test/http-serve); soundboxd installs it, arms
#           the other slot and reboots into it once its queue is empty
#   resume  (after a cut) soundboxd carries on with the update by itself
#   cuttry  the tried slot's first boot, cut before soundboxd starts
#   retry   back on the old slot after that cut: soundboxd tries again
#   tried   checks the box on the tried slot (version, the settings carried
#           over, the daemon), waits for soundboxd to commit it, powers off
#           (with update cuts, the host cuts the power right after instead)
#   badinstall, badtry, rolledback
#           the same install of the broken bundle (its soundboxd never
#           starts); its tried boot, left by the health check at its 5th
#           failure (this script only checks it is on trial); the box back
#           on the good slot, saying "rolled back" and why
#   drain   waits until the queue is empty and powers off
#   soak, settle
#           image/soak-update: payments, and the update asked for again
#           and again while the host cuts the power; then the box settled
#
# A boot may do more than one, in turn ("tried badinstall": the good
# update's checks, then the broken one installed on the same boot;
# "rolledback drain"): only the last one ends the boot. Boots under TCG
# take minutes each.
#
# Daemon log lines and receipts go to the host as they happen, on the
# virtio-serial ports "journal" and "receipts" (they survive the cut).
set -u
K=/run/testkit
MODES=$(cat "$K/mode")
MODE=${MODES%% *}
last_mode() { [ "$MODE" = "${MODES##* }" ]; }
BOOT=$(cat "$K/boot")
OUT=$K/out/boot-$BOOT
mkdir -p "$OUT"
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
LD_LIBRARY_PATH=$K/root/usr/lib/$(uname -m)-linux-gnu
export LD_LIBRARY_PATH
DEVICE=$(cat "$K/device")
BOARD=$(cat "$K/board")
TOPIC=soundbox/v1/$DEVICE
TLS=(--cafile "$K/tls/ca.crt" --cert "$K/tls/backend.crt" --key "$K/tls/backend.key" -h localhost -p 8883)
exec 2>"$OUT/guest.err"
T0=$(cut -d' ' -f1 /proc/uptime)
note() { echo "[$(awk -v t0="$T0" '{printf "%6.2f", $1 - t0}' /proc/uptime)] $*" >&2; }
R=$OUT/results.txt
: > "$R"
# Its own pass/fail, not scripts/lib.sh's: this file is copied alone into
# the share, and its lines go to results.txt, which image/boot-test counts.
pass() { echo "PASS $1${2:+ ($2)}" >> "$R"; note "PASS $1 ${2:-}"; }
fail() { echo "FAIL $1: $2" >> "$R"; note "FAIL $1: $2"; }
fact() { echo "FACT $1 $2" >> "$R"; note "FACT $1 $2"; }
check() {   # check NAME DETAIL COMMAND...: PASS when COMMAND succeeds
  local name=$1 detail=$2; shift 2
  if "$@" >>"$OUT/check.log" 2>&1; then pass "$name" "$detail"; else fail "$name" "$detail"; fi
}
# until_true SECONDS COMMAND...: polls a condition that has no event to await
until_true() {
  local n=$(($1 * 5)); shift
  while [ "$n" -gt 0 ]; do "$@" && return 0; sleep 0.2; n=$((n - 1)); done
  return 1
}

# --- the broker, before soundboxd (this unit is Type=notify) -----------------
"$K/root/usr/sbin/mosquitto" -c "$K/mosquitto.conf" > "$OUT/mosquitto.log" 2>&1 &
until_true 30 bash -c 'ss -Htln | grep -q "127.0.0.1:8883 "' || fail broker "mosquitto did not listen within 30 s"
sub() { "$K/root/usr/bin/mosquitto_sub" "${TLS[@]}" "$@"; }
pub() { "$K/root/usr/bin/mosquitto_pub" "${TLS[@]}" "$@"; }
ports=/dev/virtio-ports
until_true 10 test -e "$ports/receipts" || note "no virtio port receipts"
# Every receipt, as the backend sees it, to the host.
# A virtio port has one opener: the markers below go through the same one.
exec 3> "$ports/receipts"
sub -q 1 -v -t "$TOPIC/receipt" >&3 &
marker() { echo "$*" >&3; }
# The bundle's web server (the backend's, here on the guest's loopback).
if [ -d "$K/bundle" ]; then
  systemd-socket-activate --accept --inetd -l 127.0.0.1:8080 /bin/bash "$K/http-serve" "$K/bundle" 2>>"$OUT/http.log" &
fi
# What this boot is (the host times image/soak-update's cuts from it, and says what a cut hit).
marker "BOOTED boot=$BOOT $(/usr/lib/soundbox-image/slots show 2>&1 | tr '\n' ' ')"
if [ "$MODE" = cuttry ]; then
  # The new slot's first boot: the host cuts the power now, before soundboxd
  # (ordered after this unit's readiness) has started, so before any verdict.
  until_true 120 systemctl is-active -q soundbox-boot-reason.service || note "soundbox-boot-reason.service did not finish"
  /usr/lib/soundbox-image/slots show > "$OUT/slots.txt" 2>&1
  # shellcheck disable=SC2015 # pass and fail only log: an if-then-else
  grep -qx tried=yes "$OUT/slots.txt" && pass cuttry_on_trial "$(tr '\n' ' ' < "$OUT/slots.txt")" || fail cuttry_on_trial "$(tr '\n' ' ' < "$OUT/slots.txt")"
  sync
  marker "TRYING boot=$BOOT"
  sleep infinity
fi
if [ "$MODE" = badtry ]; then
  # The broken slot on trial: its soundboxd (ordered after this unit) fails
  # at every start; at the 5th failure the health check marks the slot bad
  # and reboots into the default at once, not at its 10-minute deadline
  # (what the broken slot did to the database: rolledback's old_reads_newer).
  /usr/lib/soundbox-image/slots show > "$OUT/slots.txt" 2>&1
  check broken_slot_tried "$(tr '\n' ' ' < "$OUT/slots.txt")" grep -qx tried=yes "$OUT/slots.txt"
  sync
  marker "BADTRY boot=$BOOT"
  systemd-notify --ready
  sleep 300
  fail health_rollback "no rollback within 300 s of the broken slot's start: $(systemctl show -P NRestarts soundboxd) restarts, $(systemctl status soundbox-update-health.service 2>&1 | head -4 | tr '\n' ' ')"
  sync
  systemctl poweroff
  sleep infinity
fi
systemd-notify --ready
note "broker up, soundboxd may start"

# soundboxd's start job finishes when it says READY (Type=notify).
systemctl start soundboxd.service ssh.service
journalctl -f -n all -o cat -u soundboxd > "$ports/journal" &
ready_us=$(systemctl show -P ActiveEnterTimestampMonotonic soundboxd.service)
# When this test began (boot_to_ready_s includes its broker's start from the share):
fact test_unit_start_s "$T0"
[ "${ready_us:-0}" -gt 0 ] && fact boot_to_ready_s "$(awk -v u="$ready_us" 'BEGIN { printf "%.1f", u / 1e6 }')"   # (never, on a broken slot)
fact daemon_rss_kb "$(ps -o rss= -C soundboxd | tr -d ' ')"
if [ -e "$K/analyze" ]; then
  systemd-analyze critical-chain soundboxd.service > "$OUT/chain.txt" 2>&1 || true
  systemd-analyze blame > "$OUT/blame.txt" 2>&1 || true
fi
marker "READY boot=$BOOT"
# The boot's own start job got it there: the one above only waited for it
# (a start that failed before the test's is never retried in the field).
if journalctl -b -o cat -u soundboxd.service | grep -q '^Dependency failed for soundboxd'; then
  fail started_by_boot "the boot's start of soundboxd failed: $(journalctl -b -o cat -u soundboxd.service | grep -m1 -i 'failed' | cut -c1-160)"
else
  pass started_by_boot "no failed start job for soundboxd.service in this boot"
fi

ctl() { soundboxctl "$@"; }
connected() { ctl status 2>/dev/null | grep -q '^mqtt: *connected'; }
until_true 60 connected || fail mqtt "soundboxd did not connect to the guest's broker over TLS within 60 s: $(ctl status 2>&1 | grep mqtt)"

# The device demands signatures (payment.signing = required, the key
# provisioned as signing.pem): every payment is signed as a backend would.
unsigned() { echo "{\"id\":\"$1\",\"amount\":\"$2\",\"currency\":\"CNY\",\"ts\":$(date +%s)}"; }
payment() {   # payment ID AMOUNT
  pub -q 1 -t "$TOPIC/payment" -m "$(soundboxctl sign --key "$K/signing.key" --device "$DEVICE" "$(unsigned "$1" "$2")")"
}

# await_reboot SECONDS NAME WHY: the box reboots itself (the test ends with
# this boot); if it has not within SECONDS, NAME fails and it powers off.
await_reboot() {
  until_true "$1" false && return
  fail "$2" "$3 (within $1 s)"
  systemctl poweroff
}

# The boot after a power cut right after the commit (tried, with update
# cuts): the commit held, the box runs the new slot as its default.
if [ -e "$K/commit-cut" ]; then
  rm -f "$K/commit-cut"
  slots=/usr/lib/soundbox-image/slots
  check committed_after_cut "the power cut right after the commit: $($slots show | tr '\n' ' ')" bash -c \
    "$slots show | grep -qx current=B && $slots show | grep -qx default=B && $slots show | grep -qx tried=no"
fi

for MODE in $MODES; do
case "$MODE" in
first)
  check soundboxd_ready "active under systemd (Type=notify: READY)" systemctl is-active -q soundboxd
  ctl status > "$OUT/status-first.txt" 2>&1
  check status_slot_a "$(grep -E '^(version|slot|update|boot_reason):' "$OUT/status-first.txt" | tr -s ' ' | tr '\n' ' ')" bash -c \
    "grep -qx 'slot: *A' '$OUT/status-first.txt' && grep -qx 'update: *idle' '$OUT/status-first.txt' && grep -qx 'boot_reason: *first boot' '$OUT/status-first.txt' && grep -qx \"version: *\$(dpkg-query -W -f='\${Version}' soundbox)\" '$OUT/status-first.txt'"
  connected && pass mqtt_tls "connected with the provisioned CA, certificate and key"
  check network_watched "soundboxd watches the links and routes (its unit allows routing netlink)" bash -c \
    "! journalctl -b -o cat -u soundboxd | grep -q 'cannot watch the network'"
  # -- provisioning: files in place, owners and modes, secrets off the card
  # (the boot partition is not mounted after the provisioning: fstab noauto)
  check boot_partition_unmounted "/boot/firmware is not left mounted" bash -c '! mountpoint -q /boot/firmware'
  mount /boot/firmware
  for f in soundbox.conf authorized_keys wifi.conf hostname ca.crt device.crt device.key; do
    [ -e "/boot/firmware/soundbox/$f" ] && fail provisioning_removed "$f is still on the boot partition"
  done
  [ -f /boot/firmware/soundbox/applied.txt ] && pass provisioning_removed "secrets gone from /boot/firmware/soundbox; applied.txt: $(head -1 /boot/firmware/soundbox/applied.txt)"
  same() { cmp -s "$K/provision/$1" "$2" && [ "$(stat -c '%U:%G %a' "$2")" = "$3" ]; }
  check provisioned_conf "/etc/soundbox/soundbox.conf root:soundbox 640" same soundbox.conf /etc/soundbox/soundbox.conf "root:soundbox 640"
  check provisioned_key "/etc/soundbox/tls/device.key root:soundbox 640" same device.key /etc/soundbox/tls/device.key "root:soundbox 640"
  check provisioned_cert "/etc/soundbox/tls/device.crt, ca.crt" same device.crt /etc/soundbox/tls/device.crt "root:soundbox 644"
  check provisioned_ssh "/home/tech/.ssh/authorized_keys tech:tech 600" same authorized_keys /home/tech/.ssh/authorized_keys "tech:tech 600"
  check provisioned_wifi "wpa_supplicant.conf: hex ssid, country, derived psk, 600" bash -c \
    "grep -qx '    ssid=$(printf %s 'Test Shop' | od -An -tx1 | tr -d ' \n')' /etc/wpa_supplicant/wpa_supplicant.conf &&
     grep -qx 'country=IN' /etc/wpa_supplicant/wpa_supplicant.conf &&
     grep -qE '^    psk=[0-9a-f]{64}$' /etc/wpa_supplicant/wpa_supplicant.conf &&
     [ \"\$(stat -c '%U %a' /etc/wpa_supplicant/wpa_supplicant.conf)\" = 'root 600' ]"
  check provisioned_hostname "hostname $(hostname) = device id $DEVICE" test "$(hostname)" = "$DEVICE"
  check provisioned_signing_key "/etc/soundbox/keys/signing.pem root:root 644" same signing.pem /etc/soundbox/keys/signing.pem "root:root 644"
  check no_provisioning_fault "no /etc/soundbox/provisioning.fault" test ! -e /etc/soundbox/provisioning.fault
  # -- first boot: the state partition grown to the (test) card, 1 GiB bigger than the image
  fact root_fs_mb "$(df -BM --output=size / | tail -1 | tr -dc 0-9)"
  state_mb=$(df -BM --output=size /var/lib/soundbox | tail -1 | tr -dc 0-9)
  fact state_fs_mb "$state_mb"
  check state_grown "state $state_mb MiB (512 in the image): $(journalctl -b -o cat -u soundbox-growstate | grep -m1 'growstate:')" test "$state_mb" -gt 1200
  # -- the A/B slots: booted from A, B empty and marked bad; RAUC sees both
  /usr/lib/soundbox-image/slots show > "$OUT/slots.txt" 2>&1
  # shellcheck disable=SC2010 # a diagnostic listing of systemd-boot's variables
  { ls /sys/firmware/efi/efivars/ 2>/dev/null | grep -i '^Loader'; od -c /sys/firmware/efi/efivars/LoaderEntrySelected-* 2>&1; ls /proc/device-tree/chosen/bootloader 2>&1; } > "$OUT/bootloader.txt"
  check slots_first_boot "$(tr '\n' ' ' < "$OUT/slots.txt")" bash -c \
    "grep -qx default=A '$OUT/slots.txt' && grep -qx current=A '$OUT/slots.txt' && grep -qx tried=no '$OUT/slots.txt' && grep -qx bad=B '$OUT/slots.txt'"
  if [ "$BOARD" = rpi ]; then
    # Built for this kernel, it loads (and finds no Pi firmware under QEMU).
    check tryboot_module "$(dmesg | grep -m1 -o 'soundbox-tryboot: .*')" grep -q '^soundbox_tryboot ' /proc/modules
  fi
  rauc status --detailed --output-format=json > "$OUT/rauc-status.json" 2> "$OUT/rauc-status.err"
  slot_json() { tr '{' '\n' < "$OUT/rauc-status.json" | grep "\"bootname\":\"$1\""; }
  if grep -q "\"compatible\":\"soundbox-$BOARD-" "$OUT/rauc-status.json" && grep -q '"booted":"A"' "$OUT/rauc-status.json" &&
     slot_json B | grep -q '"boot_status":"bad"' && slot_json A | grep -q '"state":"booted"'; then
    pass rauc_status "rauc $(rauc --version | awk '{print $2}'): booted A, slot B bad, $(grep -o '"compatible":"[^"]*"' "$OUT/rauc-status.json")"
  else
    fail rauc_status "$(cat "$OUT/rauc-status.json" "$OUT/rauc-status.err" | tr '\n' ' ' | cut -c1-600)"
  fi
  sdev=$(findmnt -no SOURCE /var/lib/soundbox)
  check state_partition "/var/lib/soundbox on $sdev, its own ext4, data=journal" bash -c \
    "[ '$sdev' != \"\$(findmnt -no SOURCE /)\" ] && [ \"\$(findmnt -no FSTYPE /var/lib/soundbox)\" = ext4 ] &&
     grep -qx data=journal /proc/fs/ext4/\$(basename \$(readlink -f '$sdev'))/options"
  # -- a payment, spoken on the loopback card, with its receipts
  arecord -q -D hw:Loopback,1,0 -f S16_LE -c 1 -r 22050 -t raw "$OUT/payment.raw" 2>>"$OUT/arecord.err" &
  arec=$!
  # A persistent subscription made first (-E: exit once subscribed), read after.
  sub -c -i guest-check -q 1 -E -t "$TOPIC/receipt"
  payment FIRST-1 123.45
  sub -c -i guest-check -q 1 -C 2 -W 90 -t "$TOPIC/receipt" > "$OUT/receipts.txt"
  ctl wait --timeout 60 >/dev/null
  kill -INT "$arec"; wait "$arec"
  if grep -q '"id":"FIRST-1","status":"queued"' "$OUT/receipts.txt" && grep -q '"id":"FIRST-1","status":"played"' "$OUT/receipts.txt"; then
    pass payment_receipts "queued and played"
  else
    fail payment_receipts "got: $(tr '\n' ' ' < "$OUT/receipts.txt")"
  fi
  # An unsigned payment (anyone with publish rights could send it) is refused.
  pub -q 1 -t "$TOPIC/payment" -m "$(unsigned FORGED-1 999.00)"
  sub -c -i guest-check -q 1 -C 1 -W 60 -t "$TOPIC/receipt" > "$OUT/forged.txt"
  if grep -q '"id":"FORGED-1","status":"rejected".*"reason":"signature: missing"' "$OUT/forged.txt"; then
    pass unsigned_refused "$(cut -c1-120 "$OUT/forged.txt")"
  else
    fail unsigned_refused "got: $(tr '\n' ' ' < "$OUT/forged.txt")"
  fi
  # (the host measures the captured sound: payment.raw)
  # -- doctor: everything OK but the absent GPIO chip (and the clock: no network here)
  ctl doctor > "$OUT/doctor.txt" 2>&1
  bad=$(grep -E '^(WARN|FAIL)' "$OUT/doctor.txt" | grep -vE '^(FAIL|WARN) +gpio |^WARN +clock ')
  if [ -z "$bad" ] && grep -Eq '^OK +audio' "$OUT/doctor.txt" && grep -Eq '^OK +broker' "$OUT/doctor.txt" && grep -Eq '^OK +provisioning' "$OUT/doctor.txt" &&
     grep -Eq '^OK +signing +required; 1 key' "$OUT/doctor.txt"; then
    pass doctor "OK but: $(grep -E '^(WARN|FAIL)' "$OUT/doctor.txt" | awk '{print $1, $2}' | tr '\n' ' ')"
  else
    fail doctor "$(tr '\n' '|' < "$OUT/doctor.txt")"
  fi
  # -- the technician: key login as tech, soundboxctl and the journal; no password, no root
  install -m 0600 "$K/tech_key" /run/tech_key
  sshq=(ssh -i /run/tech_key -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR)
  "${sshq[@]}" tech@127.0.0.1 'id; soundboxctl status; journalctl -u soundboxd --no-pager -n 100' > "$OUT/ssh.txt" 2>&1
  if grep -q 'groups=.*(soundbox)' "$OUT/ssh.txt" && grep -q '^state:' "$OUT/ssh.txt" && grep -q 'speaking' "$OUT/ssh.txt"; then
    pass ssh_tech "key login; soundboxctl status and journalctl -u soundboxd work as tech"
  else
    fail ssh_tech "$(tr '\n' '|' < "$OUT/ssh.txt" | cut -c1-400)"
  fi
  if ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o PubkeyAuthentication=no \
       -o PreferredAuthentications=password,keyboard-interactive tech@127.0.0.1 true > "$OUT/ssh-password.txt" 2>&1; then
    fail ssh_password "a login without a key succeeded"
  elif grep -q 'Permission denied (publickey)' "$OUT/ssh-password.txt"; then
    pass ssh_password "refused: $(grep -o 'Permission denied (publickey)' "$OUT/ssh-password.txt")"
  else
    fail ssh_password "$(tr '\n' ' ' < "$OUT/ssh-password.txt")"
  fi
  # shellcheck disable=SC2015 # pass and fail only log: an if-then-else
  "${sshq[@]}" root@127.0.0.1 true > "$OUT/ssh-root.txt" 2>&1 && fail ssh_root "root logged in" || pass ssh_root "refused"
  check sshd_config "sshd -T: no passwords, no root" bash -c \
    "sshd -T | grep -qx 'passwordauthentication no' && sshd -T | grep -qx 'permitrootlogin no' && sshd -T | grep -qx 'kbdinteractiveauthentication no'"
  # shellcheck disable=SC2016 # $2 is awk's field, not the shell's
  check no_passwords "/etc/shadow: every password field locked" awk -F: '$2 !~ /^(\*|!.*)?$/ { bad = 1 } END { exit bad }' /etc/shadow
  # -- field basics
  ss -Htlnup > "$OUT/listeners.txt"
  others=$(grep -v ':8883 ' "$OUT/listeners.txt" | grep -v '"sshd' || true)
  if [ -z "$others" ] && grep -q '"sshd' "$OUT/listeners.txt"; then pass listeners "only sshd (and the test broker)"; else fail listeners "$(tr '\n' '|' < "$OUT/listeners.txt")"; fi
  check journal_volatile "journal in /run, capped: $(journalctl --header | grep -m1 -o 'File path: [^ ]*')" bash -c \
    "journalctl --header | grep -q 'File path: /run/log/journal' && ! journalctl --header | grep -q 'File path: /var' && [ -z \"\$(find /var/log/journal -name '*.journal' 2>/dev/null)\" ]"
  check timesync "systemd-timesyncd enabled" systemctl is-enabled -q systemd-timesyncd
  check watchdog "systemd arms the hardware watchdog: $(cat /sys/class/watchdog/watchdog0/identity 2>/dev/null), $(systemctl show -P RuntimeWatchdogUSec)" \
    bash -c "[ \"\$(cat /sys/class/watchdog/watchdog0/state)\" = active ] && [ \"\$(systemctl show -P RuntimeWatchdogUSec)\" != 0 ]"
  check hostname_in_topic "status retained on $TOPIC/status" bash -c \
    "$K/root/usr/bin/mosquitto_sub ${TLS[*]} -C 1 -W 10 -t '$TOPIC/status' | grep -q '\"online\":true'"
  # -- bad provisioning folders: nothing applied, the files kept, doctor
  # names file and line, status lists the fault
  F=/boot/firmware/soundbox
  cp /etc/soundbox/soundbox.conf "$OUT/conf-before"
  bad_case() {   # bad_case NAME EXPECTED_FAULT_PREFIX (the files are in $F)
    local name=$1 want=$2 got
    systemctl reset-failed soundbox-provision.service   # many restarts in a row: no start limit here
    systemctl restart soundbox-provision.service
    got=$(cat /etc/soundbox/provisioning.fault 2>/dev/null)
    # shellcheck disable=SC2010,SC2143 # kept: grep -q could end ls early (SIGPIPE); a short listing, the names are the test's own
    if [ "${got#"$want"}" != "$got" ] && cmp -s "$OUT/conf-before" /etc/soundbox/soundbox.conf &&
       [ -n "$(ls -A "$F" | grep -v -e README -e applied)" ] && ctl status | grep -q '^faults:.*provisioning'; then
      pass "provision_refuses_$name" "$got"
    else
      # shellcheck disable=SC2012 # ls: a list for the message
      fail "provision_refuses_$name" "fault '$got', expected '$want...'; files: $(ls "$F" | tr '\n' ' ')"
    fi
    clear_folder
  }
  clear_folder() { rm -rf "${F:?}"/*.conf "$F"/*.crt "$F"/*.key "$F"/*.pem "$F"/authorized_keys "$F"/hostname /etc/soundbox/provisioning.fault; }
  printf 'device.id = %s\naudio.volume = loud\n' "$DEVICE" > $F/soundbox.conf
  cp "$K/provision/authorized_keys" $F/authorized_keys
  systemctl restart soundbox-provision.service
  ctl doctor > "$OUT/doctor-bad.txt" 2>&1
  if grep -Eq '^FAIL provisioning +soundbox/soundbox.conf:2: audio.volume' "$OUT/doctor-bad.txt"; then
    pass doctor_names_file_line "$(grep '^FAIL provisioning' "$OUT/doctor-bad.txt" | cut -c1-160)"
  else
    fail doctor_names_file_line "$(tr '\n' '|' < "$OUT/doctor-bad.txt")"
  fi
  # One refused folder end to end on the image: the fault in status, the
  # settings kept, the files left on the card. Every other hostile folder
  # (wifi, hostname, PEM, SSH and signing keys, NUL bytes, size, a folder or
  # a FIFO for a file) is refused by the same script on the host, in
  # seconds (Tests/DaemonTests/ProvisionTests.swift); a run of it here is
  # 10 s under TCG. The PC image runs it; the Pi has the same script.
  if [ "$BOARD" != generic ]; then
    clear_folder
    note "the refused provisioning folder: on the PC image (the same script); the hostile ones: ProvisionTests on the host"
  else
    bad_case settings "soundbox/soundbox.conf:2: audio.volume = 'loud' is not allowed"
  fi
  # Written on Windows: CRLF line ends are fine, and the file is applied.
  sed 's/$/\r/' "$K/provision/soundbox.conf" > $F/soundbox.conf
  systemctl restart soundbox-provision.service
  if [ ! -e $F/soundbox.conf ] && [ ! -e /etc/soundbox/provisioning.fault ] && cmp -s "$OUT/conf-before" /etc/soundbox/soundbox.conf; then
    pass provision_crlf "a CRLF soundbox.conf applied as the same settings"
  else
    # shellcheck disable=SC2012 # ls: a list for the message
    fail provision_crlf "fault: $(cat /etc/soundbox/provisioning.fault 2>/dev/null); left: $(ls $F | tr '\n' ' ')"
  fi
  # shellcheck disable=SC2015 # pass and fail only log: an if-then-else
  ctl status | grep -q '^faults: *none' && pass fault_cleared "status faults: none again" || fail fault_cleared "$(ctl status | grep faults)"
  sync
  marker "DONE boot=$BOOT"
  systemctl poweroff
  ;;
stream)
  marker "STREAMING boot=$BOOT"
  k=0
  while :; do
    k=$((k + 1))
    payment "C$BOOT-$k" "$((k % 9 + 1)).00"
    sleep 1   # the rate of payments, not a synchronisation
  done
  ;;
install|badinstall)
  # The good update as the backend sends it (signed cmd update over MQTT,
  # from the HTTP server); the broken one as a technician would (soundboxctl
  # over SSH, the bundle from a stick). The same updater: soundboxd runs the
  # image's helper (rauc install over D-Bus as user soundbox), arms the
  # other slot, and asks for the reboot once its queue is empty.
  slots=/usr/lib/soundbox-image/slots
  bdir=$K/bundle; [ "$MODE" = install ] || bdir=$K/badbundle
  # shellcheck disable=SC2012 # the first by name; the names are the test's own
  bundle=$(ls "$bdir"/*.raucb | head -1)
  cur=$($slots get-current); oth=$([ "$cur" = A ] && echo B || echo A)
  # shellcheck source=image/files/usr/lib/soundbox-image/layout
  other_dev=/dev/disk/by-partuuid/5b0c0001-0$(. /usr/lib/soundbox-image/layout; layout_board "$BOARD"; eval echo "\$part_root_$oth")
  if [ "$MODE" = badinstall ]; then
    echo "$oth" > "$bdir/slot"
  else
    # Refused before anything is written: the other slot's state and first 16 MiB unchanged.
    fingerprint() { $slots show; dd if="$other_dev" bs=1M count=16 status=none | sha256sum; }
    for want in "wrong-key:signature verification failed" "other-board:Compatible mismatch" \
                "older:older than what runs" "tampered:does not match its signature" "truncated:Invalid bundle format|exceeds bundle size|too small"; do
      name=${want%%:*} why=${want#*:}
      before=$(fingerprint)
      ctl update install "$K/refused/$name.raucb" --wait > "$OUT/refused-$name.log" 2>&1; rc=$?
      reason=$(ctl update status | sed -n 's/^reason: *//p')
      after=$(fingerprint)
      if [ "$rc" -ne 0 ] && [ "$before" = "$after" ] && grep -Eq "$why" <<<"$reason" && [ ! -e "/var/lib/soundbox/update/$name.raucb" ]; then
        pass "refused_$name" "failed, nothing written: $(cut -c1-150 <<<"$reason")"
      else
        fail "refused_$name" "exit $rc, slot $([ "$before" = "$after" ] && echo unchanged || echo CHANGED), reason: $(cut -c1-200 <<<"$reason"); $(tail -2 "$OUT/refused-$name.log" | tr '\n' ' ')"
      fi
    done
  fi
  payment "U$BOOT-before" "1.11"
  # The reboot soundboxd asks for waits until the checks below are done:
  # the root path unit that carries it out is started again after them.
  # (With update cuts the host cuts this boot during the download.)
  systemctl stop soundbox-update-reboot.path
  t=$(date +%s)
  if [ "$MODE" = install ]; then
    cmd="{\"cmd\":\"update\",\"id\":\"UPD-$BOOT\",\"url\":\"http://127.0.0.1:8080/$(basename "$bundle")\",\"sha256\":\"$(cat "$bdir/sha256")\",\"version\":\"$(cat "$bdir/version")\"}"
    pub -q 1 -t "$TOPIC/cmd" -m "$(soundboxctl sign --kind cmd --key "$K/signing.key" --device "$DEVICE" "$cmd")"
  else
    ctl update install "$bundle" --wait > "$OUT/update-install.log" 2>&1 &
  fi
  until_true 120 bash -c "soundboxctl update status | grep -qE '^state: *(downloading|installing|waiting to reboot)'"
  payment "U$BOOT-during" "2.22"
  # (With update cuts the host cuts the power during this download.)
  ended() { ctl update status 2>/dev/null | grep -qE '^state: *(waiting to reboot|failed)'; }
  until_true 900 ended
  ctl update status > "$OUT/update-status.txt" 2>&1
  check update_install "$(grep -E '^(state|reason):' "$OUT/update-status.txt" | tr -s ' ' | tr '\n' ' ')" grep -q '^state: *waiting to reboot' "$OUT/update-status.txt"
  fact install_s "$(( $(date +%s) - t ))"
  journalctl -b -o cat -u rauc > "$OUT/rauc.log" 2>&1
  check post_install_handler "$(grep -m1 'rauc-post-install' "$OUT/rauc.log" | cut -c1-160)" grep -q 'carries this box' "$OUT/rauc.log"
  check payload_verified "the pre-install handler read every block" grep -q 'every block of the payload verified' "$OUT/rauc.log"
  check try_armed "armed by soundboxd: $($slots show | tr '\n' ' ')" bash -c "$slots show | grep -qx try=$oth && $slots show | grep -qx default=$cur"
  marker "INSTALLED boot=$BOOT reboot=$($slots reboot-argument)"
  sync
  # soundboxd asks for the reboot itself (its queue is empty once the two
  # payments are spoken): the next boot is the tried one. No reboot: a failure.
  systemctl start soundbox-update-reboot.path
  await_reboot 300 update_reboot "soundboxd did not reboot into the update: $(ctl update status | tr '\n' ' ')"
  ;;
resume)
  # After a power cut in the download or the install: soundboxd resumes by
  # itself (the download from where it was, with a Range request; an
  # install from the start), arms and reboots.
  ended() { ctl update status 2>/dev/null | grep -qE '^state: *(waiting to reboot|failed)'; }
  until_true 900 ended
  ctl update status > "$OUT/update-status.txt" 2>&1
  marker "RESUMED boot=$BOOT $(grep '^state:' "$OUT/update-status.txt" | tr -s ' ')"
  check update_resumed "$(grep -E '^(state|reason):' "$OUT/update-status.txt" | tr -s ' ' | tr '\n' ' ')" grep -q '^state: *waiting to reboot' "$OUT/update-status.txt"
  sync
  await_reboot 300 update_reboot "soundboxd did not reboot into the update: $(ctl update status | tr '\n' ' ')"
  ;;
retry)
  # The try was cut before anything decided: back on the old slot, soundboxd
  # tries again (2 of 3) by itself.
  slots=/usr/lib/soundbox-image/slots
  ctl update status > "$OUT/update-status.txt" 2>&1
  check try_again "$($slots show | tr '\n' ' '); $(grep -E '^(state|reason):' "$OUT/update-status.txt" | tr -s ' ' | tr '\n' ' ')" bash -c \
    "$slots show | grep -qx current=A && grep -q '^reason: .*ended without a verdict (last boot: power cut); trying again (2 of 3)' '$OUT/update-status.txt'"
  sync
  await_reboot 300 update_retry "soundboxd did not reboot into the update again: $(ctl update status | tr '\n' ' ')"
  ;;
tried)
  slots=/usr/lib/soundbox-image/slots
  $slots show > "$OUT/slots.txt" 2>&1
  check tried_slot_b "$(tr '\n' ' ' < "$OUT/slots.txt")" bash -c \
    "grep -qx current=B '$OUT/slots.txt' && grep -qx tried=yes '$OUT/slots.txt'"
  check tried_version "soundbox $(dpkg-query -W -f='${Version}' soundbox) (the bundle's $(cat "$K/bundle/version"))" \
    test "$(dpkg-query -W -f='${Version}' soundbox)" = "$(cat "$K/bundle/version")"
  # shellcheck source=image/files/usr/lib/soundbox-image/layout
  check tried_root "/ is slot B's root partition: $(findmnt -no SOURCE /)" \
    test "$(readlink -f "$(findmnt -no SOURCE /)")" = "$(readlink -f "/dev/disk/by-partuuid/5b0c0001-0$(. /usr/lib/soundbox-image/layout; layout_board "$BOARD"; echo "$part_root_B")")"
  check tried_settings "the provisioned settings and identity carried over" bash -c \
    "cmp -s '$K/provision/soundbox.conf' /etc/soundbox/soundbox.conf && [ \"\$(hostname)\" = '$DEVICE' ] && cmp -s '$K/provision/authorized_keys' /home/tech/.ssh/authorized_keys && ls /etc/ssh/ssh_host_ed25519_key"
  check tried_daemon "soundboxd connected on slot B" connected
  # soundboxd commits the slot by itself once it is up, durable and connected.
  committed() { ctl update status 2>/dev/null | grep -q '^state: *committed'; }
  until_true 120 committed
  $slots show > "$OUT/slots-after.txt" 2>&1
  ctl status > "$OUT/status.txt" 2>&1
  check committed "by soundboxd: $(tr '\n' ' ' < "$OUT/slots-after.txt"); $(grep -E '^(update|version|slot|boot_reason):' "$OUT/status.txt" | tr -s ' ' | tr '\n' ' ')" bash -c \
    "grep -qx default=B '$OUT/slots-after.txt' && grep -qx current=B '$OUT/slots-after.txt' && grep -q '^update: *committed' '$OUT/status.txt'"
  check status_after_update "version, slot and the boot's reason in status" bash -c \
    "grep -qx 'version: *$(cat "$K/bundle/version")' '$OUT/status.txt' && grep -qx 'slot: *B' '$OUT/status.txt' && grep -qx 'boot_reason: *update' '$OUT/status.txt'"
  # With update cuts: the host cuts the power now, just after the commit (the next boot checks it held).
  grep -qw commit "$K/update-cuts" && touch "$K/commit-cut"
  sync
  marker "DONE boot=$BOOT"
  last_mode || continue
  [ -e "$K/commit-cut" ] && sleep infinity
  systemctl poweroff
  ;;
rolledback)
  slots=/usr/lib/soundbox-image/slots
  $slots show > "$OUT/slots.txt" 2>&1
  tried=$(cat "$K/badbundle/slot")
  check rolled_back_slot "$(tr '\n' ' ' < "$OUT/slots.txt")" bash -c \
    "! grep -qx current=$tried '$OUT/slots.txt' && ! grep -qx default=$tried '$OUT/slots.txt' && grep -qx bad=$tried '$OUT/slots.txt'"
  rolled() { ctl update status 2>/dev/null | grep -q '^state: *rolled back'; }
  until_true 60 rolled
  ctl update status > "$OUT/update-status.txt" 2>&1
  ctl status > "$OUT/status.txt" 2>&1
  check rolled_back_status "$(grep -E '^(state|reason):' "$OUT/update-status.txt" | tr -s ' ' | tr '\n' ' ')" bash -c \
    "grep -q '^state: *rolled back' '$OUT/update-status.txt' && grep -q '^reason: .*kept failing on slot $tried: [0-9]* starts failed' '$OUT/update-status.txt'"
  check old_reads_newer "$(journalctl -b -o cat -u soundboxd | grep -m1 'database_newer' | cut -c1-160)" bash -c \
    "journalctl -b -o cat -u soundboxd | grep -q 'storage: database_newer .*schema=6 program_schema=5'"
  check boot_reason_rollback "$(grep '^boot_reason:' "$OUT/status.txt" | tr -s ' ')" grep -qx 'boot_reason: *rollback' "$OUT/status.txt"
  check version_kept "$(grep '^version:' "$OUT/status.txt" | tr -s ' ') (the good update's)" grep -qx "version: *$(cat "$K/bundle/version")" "$OUT/status.txt"
  ctl doctor > "$OUT/doctor.txt" 2>&1
  check doctor_rolled_back "$(grep -E '^[A-Z]+ +update' "$OUT/doctor.txt" | tr -s ' ' | cut -c1-200)" \
    grep -Eq '^WARN +update +.*last boot: rollback; the update was rolled back: soundboxd kept failing' "$OUT/doctor.txt"
  payment "R$BOOT-after" "3.33"
  ctl wait --timeout 120 > /dev/null 2>&1
  check spoken_after_rollback "a payment after the rollback: $(ctl --json history --limit 1 | cut -c1-120)" bash -c \
    "soundboxctl history --limit 5 | grep -q 'R$BOOT-after *played'"
  sync
  marker "DONE boot=$BOOT"
  last_mode || continue
  systemctl poweroff
  ;;
soak|settle)
  # image/soak-update: payments every 5 s (each takes ~2 s to speak, so the
  # queue empties between them and the updater finds its quiet moments) and,
  # whenever no update is under way, the bundle installed again on the other
  # slot from the HTTP server (forced: the same version, as a technician
  # reinstalls it), while the host cuts the power at random moments of it.
  # settle: no new update and no payments; once the update under way has
  # ended (soundboxd reboots the box meanwhile) and the queue is empty, the
  # box must run its default slot with the update committed (or rolled
  # back). 'tried=yes' may remain: the boot that committed was a try boot,
  # and the firmware's flag says how this boot began, not what is default.
  slots=/usr/lib/soundbox-image/slots
  if [ "$MODE" = soak ]; then
    ( k=0; while :; do k=$((k + 1)); payment "S$BOOT-$k" "$((k % 9 + 1)).00"; sleep 5; done ) &   # the rate, not a synchronisation
  fi
  # shellcheck disable=SC2012 # the first by name; the names are the test's own
  url=http://127.0.0.1:8080/$(basename "$(ls "$K"/bundle/*.raucb | head -1)")
  under_way() { ctl update status 2>/dev/null | grep -qE '^state: *(downloading|installing|waiting to reboot|trying)'; }
  while :; do
    until_true 5 under_way && continue
    ctl update status > "$OUT/update-status.txt" 2>&1
    [ "$MODE" = settle ] && break
    if ! ctl update install "$url" --sha256 "$(cat "$K/bundle/sha256")" --bundle-version "$(cat "$K/bundle/version")" --force > "$OUT/ask.txt" 2>&1; then
      fail soak_update_asked "$(tr '\n' ' ' < "$OUT/ask.txt" | cut -c1-200)"
      sleep infinity
    fi
    marker "ASKED boot=$BOOT after $(sed -n 's/^state: *//p' "$OUT/update-status.txt")"
  done
  # shellcheck disable=SC2015 # pass and fail only log: an if-then-else
  ctl wait --timeout 600 > "$OUT/wait.txt" 2>&1 && pass settled_drained "queue empty: $(cat "$OUT/wait.txt")" || fail settled_drained "$(cat "$OUT/wait.txt")"
  $slots show > "$OUT/slots.txt" 2>&1
  cur=$(sed -n 's/^current=//p' "$OUT/slots.txt")
  check settled "$(tr '\n' ' ' < "$OUT/slots.txt"); $(grep -E '^(state|reason):' "$OUT/update-status.txt" | tr -s ' ' | tr '\n' ' ')" bash -c \
    "grep -qx 'default=$cur' '$OUT/slots.txt' && grep -qE '^state: *(committed|rolled back)' '$OUT/update-status.txt'"
  check settled_connected "soundboxd connected on slot $cur" connected
  sync
  marker "DONE boot=$BOOT"
  systemctl poweroff
  ;;
drain)
  check reprovisioned "a second SSH key written to the card after the first boot is applied: $(grep -c ssh- /home/tech/.ssh/authorized_keys) keys" \
    cmp -s "$K/authorized_keys.2" /home/tech/.ssh/authorized_keys
  # Grown at the first boot, skipped by its condition since (nothing run at every boot).
  check growstate_once "soundbox-growstate: $(systemctl show -P ConditionResult soundbox-growstate.service) condition; $(cat /var/lib/soundbox/slots/state-grown 2>&1) sectors" bash -c \
    "[ \"\$(systemctl show -P ConditionResult soundbox-growstate.service)\" = no ] && [ -s /var/lib/soundbox/slots/state-grown ]"
  # After the power cuts: the last boot's reason is one.
  [ "$(cat "$K/cuts")" -eq 0 ] || check boot_reason_power_cut "$(ctl status | grep '^boot_reason:' | tr -s ' ')" bash -c "soundboxctl status | grep -qx 'boot_reason: *power cut'"
  if [ -f "$K/bundle/version" ]; then
    /usr/lib/soundbox-image/slots show > "$OUT/slots.txt" 2>&1
    check drain_on_b "after the commit: $(tr '\n' ' ' < "$OUT/slots.txt")" bash -c \
      "grep -qx current=B '$OUT/slots.txt' && grep -qx default=B '$OUT/slots.txt' && grep -qx tried=no '$OUT/slots.txt'"
  fi
  # shellcheck disable=SC2015 # pass and fail only log: an if-then-else
  ctl wait --timeout 900 > "$OUT/wait.txt" 2>&1 && pass drained "queue empty: $(cat "$OUT/wait.txt")" || fail drained "$(cat "$OUT/wait.txt")"
  ctl --json history --limit 1000 > "$OUT/history.json" 2>&1
  sync
  marker "DONE boot=$BOOT"
  systemctl poweroff
  ;;
esac
done
