"""The image as a customer's box: provisioned at its first boot, a payment
spoken over TLS, the technician's SSH, an update refused, installed with a
power cut, tried and committed, a broken one rolled back by itself, the
card sound after every cut (conftest.py's Journey; each test asks for the
stage it checks and can run alone: `systest/image/run IMG -k ssh_root`)."""
import json
import re

import pytest

import bootlog
from conftest import DEVICE, K
from lab import rms, seconds, until


def only(board, journey):
    if journey.card.board != board:
        pytest.skip(f"the {board} image's check")


# -- boot 1: provisioning, the daemon, a payment, the technician ----------------------
def test_started_by_boot(first):
    """The boot's own start job brought soundboxd up (a failed start is never retried in the field)."""
    log = first.check("journalctl -b -o cat -u soundboxd.service")
    assert "Dependency failed for soundboxd" not in log, log[-400:]


def test_soundboxd_ready(first):
    """Active under systemd (Type=notify: soundboxd said READY)."""
    assert first.ok("systemctl is-active -q soundboxd")


def test_status_slot_a(first):
    st = first.status()
    version = first.check("dpkg-query -W -f='${Version}' soundbox")
    assert (st.get("slot"), st.get("update"), st.get("boot_reason"), st.get("version")) == ("A", "idle", "first boot", version), st


def test_mqtt_tls(first):
    """Connected to the guest's broker with the provisioned CA, certificate and key."""
    until(lambda: f"soundboxd connected over TLS ({first.status().get('mqtt')}; {first.tail()})", first.connected, 60)


def test_network_watched(first):
    """soundboxd watches the links and routes (its unit allows routing netlink)."""
    assert "cannot watch the network" not in first.check("journalctl -b -o cat -u soundboxd")


def test_boot_partition_unmounted(first):
    assert not first.ok("mountpoint -q /boot/firmware"), "/boot/firmware is left mounted after the provisioning"


def test_provisioning_removed(first):
    """The secrets are gone from the card's soundbox/ folder; applied.txt says what was done."""
    left = first.check("mount /boot/firmware && ls /boot/firmware/soundbox; umount /boot/firmware")
    assert sorted(left.split()) in (["README.TXT", "applied.txt"], ["README.txt", "applied.txt"]), left


PROVISIONED = [
    ("conf", "soundbox.conf", "/etc/soundbox/soundbox.conf", "root:soundbox 640"),
    ("key", "device.key", "/etc/soundbox/tls/device.key", "root:soundbox 640"),
    ("cert", "device.crt", "/etc/soundbox/tls/device.crt", "root:soundbox 644"),
    ("ssh", "authorized_keys", "/home/tech/.ssh/authorized_keys", "tech:tech 600"),
    ("signing_key", "signing.pem", "/etc/soundbox/keys/signing.pem", "root:root 644"),
]


@pytest.mark.parametrize("name,src,dst,owner", PROVISIONED, ids=[p[0] for p in PROVISIONED])
def test_provisioned(first, name, src, dst, owner):
    """Each file in place, the card's own bytes, its owner and mode."""
    assert first.ok(f"cmp -s {K}/provision/{src} {dst}"), f"{dst} differs from the card's {src}"
    assert first.check(f"stat -c '%U:%G %a' {dst}").strip() == owner


def test_provisioned_wifi(first):
    """wpa_supplicant.conf: the SSID in hex, the country, the derived key, mode 600."""
    conf = first.check("cat /etc/wpa_supplicant/wpa_supplicant.conf")
    assert "    ssid=" + "Test Shop".encode().hex() in conf.splitlines(), conf
    assert "country=IN" in conf.splitlines()
    assert re.search(r"^    psk=[0-9a-f]{64}$", conf, re.M), conf
    assert first.check("stat -c '%U %a' /etc/wpa_supplicant/wpa_supplicant.conf").strip() == "root 600"


def test_provisioned_hostname(first):
    assert first.check("hostname").strip() == DEVICE


def test_no_provisioning_fault(first):
    assert not first.ok("test -e /etc/soundbox/provisioning.fault"), first.check("cat /etc/soundbox/provisioning.fault")


def test_state_grown(first):
    """The state partition grown to the card at the first boot (512 MiB in the image, the card 1 GiB bigger)."""
    mb = int(first.check("df -BM --output=size /var/lib/soundbox | tail -1 | tr -dc 0-9"))
    assert mb > 1200, f"state {mb} MiB: {first.check('journalctl -b -o cat -u soundbox-growstate')[-300:]}"


def test_slots_first_boot(first):
    s = first.slots()
    assert (s.get("default"), s.get("current"), s.get("tried"), s.get("bad")) == ("A", "A", "no", "B"), s


def test_tryboot_module(first, journey):
    """The Pi's tryboot module, built for this kernel, loads (and finds no Pi firmware under QEMU)."""
    only("rpi", journey)
    assert first.ok("grep -q '^soundbox_tryboot ' /proc/modules"), first.run("dmesg | grep -i tryboot")[1]


def test_rauc_status(first):
    """RAUC sees both slots: booted A, B bad (empty), the board's compatible."""
    out = first.check("rauc status --detailed --output-format=json")
    st = json.loads(out)
    assert st["compatible"].startswith(f"soundbox-{first.card.board}-"), st["compatible"]
    assert st["booted"] == "A", out
    slots = {name: slot for entry in st["slots"] for name, slot in entry.items()}
    by_boot = {s.get("bootname"): s for s in slots.values() if s.get("bootname")}
    assert by_boot["A"]["state"] == "booted", out
    assert by_boot["B"].get("boot_status") == "bad", out


def test_state_partition(first):
    """/var/lib/soundbox on its own ext4 partition, data=journal."""
    src = first.check("findmnt -no SOURCE /var/lib/soundbox").strip()
    assert src != first.check("findmnt -no SOURCE /").strip()
    assert first.check("findmnt -no FSTYPE /var/lib/soundbox").strip() == "ext4"
    dev = first.check(f"basename $(readlink -f {src})").strip()
    assert "data=journal" in first.check(f"cat /proc/fs/ext4/{dev}/options").split()


@pytest.fixture
def payment(first, journey):
    """A signed payment, spoken once for the tests that read it: its receipts and the sound captured on the card."""
    if "payment" not in journey.facts:
        raw = f"{K}/out/payment.raw"
        pid = first.shell.spawn(f"arecord -q -D hw:Loopback,1,0 -f S16_LE -c 1 -r 22050 -t raw {raw}", f"{K}/out/arecord.err")
        first.pay("FIRST-1", "123.45")
        until(lambda: f"FIRST-1 played (receipts: {first.log('receipts')[-300:]})",
              lambda: '"id":"FIRST-1","status":"played"' in first.log("receipts"), 90)
        first.ctl("wait --timeout 60", timeout=90)
        first.check(f"kill -INT {pid}")
        first.shell.stopped(pid)
        journey.facts["payment"] = dict(receipts=first.log("receipts"), raw=f"{first.card.out}/payment.raw")
    return journey.facts["payment"]


def test_payment_receipts(payment):
    """Queued and played, as the backend sees it."""
    assert '"id":"FIRST-1","status":"queued"' in payment["receipts"], payment["receipts"][-400:]


def test_payment_spoken(payment):
    """Over a second and a half of sound captured on the loopback card."""
    path = payment["raw"]
    assert seconds(path) > 1.5 and rms(path) > 0.01, f"captured {seconds(path):.2f} s, RMS {rms(path):.4f}"


def test_unsigned_refused(first):
    """An unsigned payment (anyone with publish rights could send it) is rejected, with the reason."""
    first.box("unsigned FORGED-1 999.00")
    until(lambda: f"FORGED-1 rejected (receipts: {first.log('receipts')[-300:]})",
          lambda: '"id":"FORGED-1","status":"rejected"' in first.log("receipts"), 60)
    line = next(x for x in first.log("receipts").splitlines() if '"id":"FORGED-1","status":"rejected"' in x)
    assert '"reason":"signature: missing"' in line, line


def test_doctor(first):
    """doctor: all OK but the absent GPIO chip (and the clock: no network here)."""
    out = first.ctl("doctor")
    bad = [x for x in out.splitlines() if re.match(r"(WARN|FAIL)", x) and not re.match(r"(FAIL|WARN) +gpio |WARN +clock ", x)]
    assert not bad, out
    for ok in (r"OK +audio", r"OK +broker", r"OK +provisioning", r"OK +signing +required; 1 key"):
        assert re.search("^" + ok, out, re.M), out


SSH = "ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"


def test_ssh_tech(first):
    """The technician's key logs in as tech: soundboxctl and the journal work, without root."""
    first.check(f"install -m 0600 {K}/tech_key /run/tech_key")
    rc, out = first.run(f"{SSH} -i /run/tech_key tech@127.0.0.1 'id; soundboxctl status; journalctl -u soundboxd --no-pager -n 100'")
    assert re.search(r"groups=.*\(soundbox\)", out) and re.search(r"^state:", out, re.M) and "speaking" in out, out[-600:]


def test_ssh_password(first):
    rc, out = first.run(f"{SSH} -o PubkeyAuthentication=no -o PreferredAuthentications=password,keyboard-interactive tech@127.0.0.1 true")
    assert rc != 0 and "Permission denied (publickey)" in out, out


def test_ssh_root(first):
    first.check(f"install -m 0600 {K}/tech_key /run/tech_key")
    rc, out = first.run(f"{SSH} -i /run/tech_key root@127.0.0.1 true")
    assert rc != 0, "root logged in over SSH"


def test_sshd_config(first):
    conf = first.check("sshd -T").splitlines()
    for line in ("passwordauthentication no", "permitrootlogin no", "kbdinteractiveauthentication no"):
        assert line in conf, line


def test_no_passwords(first):
    """/etc/shadow: every password field locked."""
    shadow = first.check("cat /etc/shadow")
    open_ = [x.split(":")[0] for x in shadow.splitlines() if not re.fullmatch(r"(\*|!.*)?", x.split(":")[1])]
    assert not open_, open_


def test_listeners(first):
    """Only sshd listens (and the test's own broker and bundle server)."""
    out = first.check("ss -Htlnup")
    others = [x for x in out.splitlines() if not re.search(r'127\.0\.0\.1:(8883|8080) |"sshd', x)]
    assert not others and '"sshd' in out, out


def test_journal_volatile(first):
    out = first.check("journalctl --header")
    assert "File path: /run/log/journal" in out and "File path: /var" not in out
    assert not first.check("find /var/log/journal -name '*.journal' 2>/dev/null; true").strip()


def test_timesync(first):
    assert first.ok("systemctl is-enabled -q systemd-timesyncd")


def test_watchdog(first):
    """systemd arms the hardware watchdog."""
    assert first.check("cat /sys/class/watchdog/watchdog0/state").strip() == "active"
    assert first.check("systemctl show -P RuntimeWatchdogUSec").strip() != "0"


def test_hostname_in_topic(first):
    """The retained status on soundbox/v1/<hostname>/status says online."""
    out = first.box(f"sub -C 1 -W 10 -t soundbox/v1/{DEVICE}/status")
    assert '"online":true' in out, out


@pytest.fixture
def folder(first):
    """The card's provisioning folder, mounted; emptied after the test."""
    first.check("mountpoint -q /boot/firmware || mount /boot/firmware")
    first.check("cp /etc/soundbox/soundbox.conf /run/conf-before")
    yield "/boot/firmware/soundbox"
    first.check("cd /boot/firmware/soundbox && rm -f *.conf *.crt *.key *.pem authorized_keys hostname; "
                "rm -f /etc/soundbox/provisioning.fault; systemctl restart soundbox-provision.service; "
                "umount /boot/firmware 2>/dev/null; true")


def provision(first):
    first.check("systemctl reset-failed soundbox-provision.service; systemctl restart soundbox-provision.service", timeout=120)


def test_provision_refuses_settings(first, folder):
    """A bad setting: nothing applied, the files kept on the card, the fault in status, doctor names file and line."""
    first.check(f"printf 'device.id = {DEVICE}\\naudio.volume = loud\\n' > {folder}/soundbox.conf && "
                f"cp {K}/provision/authorized_keys {folder}/")
    provision(first)
    fault = first.run("cat /etc/soundbox/provisioning.fault")[1]
    assert fault.startswith("soundbox/soundbox.conf:2: audio.volume = 'loud' is not allowed"), fault
    assert first.ok("cmp -s /run/conf-before /etc/soundbox/soundbox.conf"), "settings changed"
    assert "soundbox.conf" in first.check(f"ls {folder}"), "the refused files were not kept"
    assert re.search(r"^faults:.*provisioning", first.ctl("status"), re.M)


def test_doctor_names_file_line(first, folder):
    """doctor names the card's file and line of a bad setting."""
    first.check(f"printf 'device.id = {DEVICE}\\naudio.volume = loud\\n' > {folder}/soundbox.conf")
    provision(first)
    doctor = first.ctl("doctor")
    assert re.search(r"^FAIL provisioning +soundbox/soundbox.conf:2: audio.volume", doctor, re.M), doctor


def test_provision_crlf(first, folder):
    """Written on Windows: CRLF line ends are fine; the same settings applied."""
    first.check(f"sed 's/$/\\r/' {K}/provision/soundbox.conf > {folder}/soundbox.conf")
    provision(first)
    assert not first.ok(f"test -e {folder}/soundbox.conf"), "soundbox.conf left on the card"
    assert not first.ok("test -e /etc/soundbox/provisioning.fault"), first.run("cat /etc/soundbox/provisioning.fault")[1]
    assert first.ok("cmp -s /run/conf-before /etc/soundbox/soundbox.conf")


def test_fault_cleared(first, folder):
    """A refused folder, then a good one: status says no fault again."""
    first.check(f"printf 'audio.volume = loud\\n' > {folder}/soundbox.conf")
    provision(first)
    assert re.search(r"^faults:.*provisioning", first.ctl("status"), re.M)
    first.check(f"cp {K}/provision/soundbox.conf {folder}/soundbox.conf")
    provision(first)
    assert re.search(r"^faults: *none", first.ctl("status"), re.M), first.ctl("status")


# -- after boot 1: the card, read on the host ------------------------------------------
@pytest.fixture
def first_off(journey):
    return journey.reach("first_off")


def test_card_after(first_off):
    """Only README and applied.txt are left in the card's soundbox/ folder."""
    left = sorted(x.rsplit("/", 1)[-1] for x in first_off.card.mtools("mdir", "-b", "::/soundbox").split())
    assert left in (["README.TXT", "applied.txt"], ["README.txt", "applied.txt"]), left


def test_key_shredded(first_off):
    """No byte of device.key is left on the boot partition: overwritten, not only unlinked."""
    card = first_off.card
    key = open(f"{card.kit}/tls/device.key").read().splitlines()[1].encode()
    off, size = card.offset(1)
    with open(card.path, "rb") as f:
        f.seek(off)
        assert key not in f.read(size)


def test_disk_boot1(first_off):
    assert first_off.card.check("boot1") == []


# -- the update: refused five ways, then installed with a cut in its download -----------
@pytest.fixture
def install_cut(journey):
    return journey.reach("install_cut")


REFUSED = {"wrong-key": "signature verification failed", "other-board": "Compatible mismatch",
           "older": "older than what runs", "tampered": "does not match its signature",
           "truncated": "Invalid bundle format|exceeds bundle size|too small"}


@pytest.mark.parametrize("name", REFUSED)
def test_refused(install_cut, name):
    """Refused before anything is written: failed with the reason, the other slot unchanged, no copy left."""
    r = install_cut.facts["refused"][name]
    assert r["rc"] != 0 and re.search(REFUSED[name], r["reason"]), r
    assert r["same"], f"the other slot changed: {r}"
    assert not r["copy_left"], f"the bundle's copy was left in the update folder: {r}"


def test_refused_receipts(install_cut):
    """A failed update receipt each, with a reason."""
    got = re.findall(r'"kind":"update","status":"failed".*"reason":', install_cut.box.log("receipts", install_cut.facts["install_boot"]))
    assert len(got) >= 5, got


def test_cut_download(install_cut):
    """The power cut during the download (not after it)."""
    assert not install_cut.facts["download_over"], "the download was over before the cut"


@pytest.fixture
def resumed(journey):
    return journey.reach("resumed")


def test_update_resumed(resumed):
    st = resumed.facts["resumed"]["status"]
    assert st.get("state") == "waiting to reboot", st


def test_download_resumed(resumed):
    """After the cut: the download resumed with a Range request, not from the start."""
    http = bootlog.read(f"{resumed.card.out}/http-{resumed.facts['install_boot'] + 1}.log")
    m = re.search(r"range=([0-9]+)-", http)
    assert m and m.group(1) != "0", http[:300]


def test_update_tryboot_asked(resumed):
    """The boot before the tried one ended in a reboot asked with "0 tryboot"."""
    only("rpi", resumed)
    assert resumed.facts["reboot"] == "0 tryboot", resumed.facts["reboot"]


def test_cuttry_on_trial(journey):
    """The new slot's first boot is on trial."""
    s = journey.reach("firstboot_cut").facts["firstboot"]
    assert s.get("tried") == "yes", s


def test_try_again(journey):
    """Back on the old slot after that cut, soundboxd tries again (2 of 3) by itself."""
    r = journey.reach("retried").facts["retried"]
    assert r["slots"].get("current") == "A", r
    assert "ended without a verdict (last boot: power cut); trying again (2 of 3)" in r["update"].get("reason", ""), r


def test_post_install_handler(resumed):
    assert "carries this box" in resumed.facts["resumed"]["rauc"], resumed.facts["resumed"]["rauc"][-400:]


def test_payload_verified(resumed):
    assert "every block of the payload verified" in resumed.facts["resumed"]["rauc"], resumed.facts["resumed"]["rauc"][-400:]


def test_try_armed(resumed):
    s = resumed.facts["resumed"]["slots"]
    assert s.get("try") == "B" and s.get("default") == "A", s


@pytest.fixture
def tried(journey):
    return journey.reach("tried")


def test_tried_slot_b(tried):
    s = tried.facts["tried"]["slots"]
    assert s.get("current") == "B" and s.get("tried") == "yes", s


def test_tried_version(tried):
    assert tried.facts["tried"]["version"] == tried.card.version


def test_tried_root(tried):
    assert tried.facts["tried"]["root"] == tried.box.check(
        f"readlink -f /dev/disk/by-partuuid/5b0c0001-0{tried.card.root_b}").strip()


def test_tried_settings(tried):
    """The provisioned settings and identity carried over."""
    b = tried.box
    assert b.ok(f"cmp -s {K}/provision/soundbox.conf /etc/soundbox/soundbox.conf")
    assert b.check("hostname").strip() == DEVICE
    assert b.ok(f"cmp -s {K}/provision/authorized_keys /home/tech/.ssh/authorized_keys")
    assert b.ok("test -s /etc/ssh/ssh_host_ed25519_key")


def test_tried_daemon(tried):
    """soundboxd connected on slot B."""
    assert tried.facts["tried"]["connected"]


def test_committed(tried):
    s, st = tried.facts["committed"]["slots"], tried.facts["committed"]["status"]
    assert s.get("default") == "B" and s.get("current") == "B" and st.get("update", "").startswith("committed"), (s, st)


def test_status_after_update(tried):
    st = tried.facts["committed"]["status"]
    assert (st.get("version"), st.get("slot"), st.get("boot_reason")) == (tried.card.version, "B", "update"), st


def test_update_spoken_once(tried):
    """The payments sent before and during the install: each spoken once, played."""
    assert tried.not_spoken_once(tried.facts["install_boot"]) == []


# -- a broken update: tried, left by the health check, rolled back ---------------------
def test_disk_update(journey):
    """The card after the update's boots: fsck and integrity_check."""
    assert journey.reach("bad_installed").facts["disk_update"] == []


@pytest.fixture
def bad_tried(journey):
    return journey.reach("bad_tried")


def test_bad_install(bad_tried):
    assert bad_tried.facts["bad_install"].get("state") == "waiting to reboot", bad_tried.facts["bad_install"]


def test_broken_slot_tried(bad_tried):
    s = bad_tried.facts["bad_tried"]
    assert s.get("current") == bad_tried.facts["bad_slot"] and s.get("tried") == "yes", s


@pytest.fixture
def rolled_back(journey):
    return journey.reach("rolled_back")


def test_rolled_back_slot(rolled_back):
    s, bad = rolled_back.facts["rolled_back"]["slots"], rolled_back.facts["bad_slot"]
    assert s.get("current") != bad and s.get("default") != bad and s.get("bad") == bad, s


def test_rolled_back_status(rolled_back):
    u, bad = rolled_back.facts["rolled_back"]["update"], rolled_back.facts["bad_slot"]
    assert u.get("state", "").startswith("rolled back"), u
    assert re.search(rf"kept failing on slot {bad}: [0-9]* starts failed", u.get("reason", "")), u


def test_old_reads_newer(rolled_back):
    """The old soundboxd reads the database the broken one's newer schema left."""
    log = rolled_back.box.check("journalctl -b -o cat -u soundboxd")
    assert re.search(r"storage: database_newer .*schema=6 program_schema=5", log), log[-400:]


def test_boot_reason_rollback(rolled_back):
    assert rolled_back.facts["rolled_back"]["status"].get("boot_reason") == "rollback"


def test_version_kept(rolled_back):
    assert rolled_back.facts["rolled_back"]["status"].get("version") == rolled_back.card.version


def test_doctor_rolled_back(rolled_back):
    d = rolled_back.facts["rolled_back"]["doctor"]
    assert re.search(r"^WARN +update +.*last boot: rollback; the update was rolled back: soundboxd kept failing", d, re.M), d


def test_spoken_after_rollback(rolled_back):
    h = rolled_back.facts["history"]
    assert re.search(rf"R{rolled_back.box.n}-after +played", h), h


def test_bad_update_spoken_once(rolled_back):
    """The payments sent before and during the broken install: each spoken once, played."""
    assert rolled_back.not_spoken_once(rolled_back.facts["bad_boot"]) == []


def test_committed_after_cut(journey):
    """The power cut right after the commit: the commit held, the new slot the default."""
    s = journey.reach("streamed").facts["after_commit_cut"]
    assert (s.get("current"), s.get("default"), s.get("tried")) == ("B", "B", "no"), s


# -- the last boot: the box drained -------------------------------------------------------
@pytest.fixture
def drain_boot(journey):
    return journey.reach("drain_boot")


def test_reprovisioned(drain_boot):
    """A second SSH key written to the card after the first boot is applied."""
    assert drain_boot.box.ok(f"cmp -s {K}/authorized_keys.2 /home/tech/.ssh/authorized_keys")


def test_growstate_once(drain_boot):
    """The state partition was grown at the first boot, skipped by its condition since."""
    b = drain_boot.box
    assert b.check("systemctl show -P ConditionResult soundbox-growstate.service").strip() == "no"
    assert b.ok("test -s /var/lib/soundbox/slots/state-grown")


def test_drain_on_b(drain_boot):
    s = drain_boot.facts["drain_slots"]
    assert (s.get("current"), s.get("default")) == ("B", "B"), s


def test_boot_reason_power_cut(drain_boot):
    """After the power cuts, the boot's reason is one."""
    only("rpi", drain_boot)
    assert drain_boot.facts["drain_status"].get("boot_reason") == "power cut", drain_boot.facts["drain_status"]


@pytest.fixture
def drained(journey):
    return journey.reach("drained")


def test_drained(drained):
    rc, out = drained.facts["drained"]
    assert rc == 0, out


@pytest.fixture
def last(journey):
    """The journey's end."""
    return journey.reach(journey.stages[-1])


def test_update_cuts(last):
    """Every cut the journey makes was made."""
    want = {"generic": 1, "rpi": 5}.get(last.name, last.cuts_wanted)
    assert len(last.facts["cuts"]) == want, [(c["what"], c["hit"]) for c in last.facts["cuts"]]


def test_exactly_once(last):
    """Over the boots from the first streaming one on: every payment whose queued receipt the
    backend saw was spoken, none twice but where a cut allows it (systest/bootlog.py)."""
    if "first_stream" not in last.facts:
        pytest.skip("no payments stream on this journey")
    b = last.box
    ok, account = bootlog.exactly_once([(b.log("receipts", n), b.log("journal", n))
                                        for n in range(last.facts["first_stream"], b.n + 1)])
    assert ok, account
    print(account)


# -- the soak of updates (image/soak-update) ---------------------------------------------
@pytest.fixture
def settled(journey):
    return journey.reach("settled")


def test_soak_settled(settled):
    """The box settled: its default slot running, the update committed or rolled back, the queue empty, connected."""
    f = settled.facts["settled"]
    assert f["slots"].get("default") == f["slots"].get("current"), f
    assert re.match(r"(committed|rolled back)", f["update"].get("state", "")), f
    assert f["drained"][0] == 0 and f["connected"], f


def test_soak_no_failed_update(settled):
    b = settled.box
    failed = [x for n in range(1, b.n + 1) for x in b.log("receipts", n).splitlines()
              if '"kind":"update","status":"failed"' in x]
    assert not failed, failed[:3]


def test_soak_reboots_only_when_up(settled):
    """Only soundboxd reboots a box here, and only once it is up."""
    early = [n for n, up in settled.facts["soak_reboots"] if not up]
    assert not early, f"boots that ended before soundboxd was up: {early}"


def test_started_by_boot_each(drained):
    """On every boot that ran soundboxd, the boot's own start job started it."""
    bad = {n: why for n, why in drained.facts["started"].items() if why}
    assert not bad, bad


def test_disk_final(last):
    assert last.facts["disk_final"] == []


# -- each power cut: the card as the next boot finds it --------------------------------------
@pytest.mark.parametrize("stage,what", [("install_cut", "during the download"), ("install_cut2", "during the install"),
                                        ("firstboot_cut", "during the new slot's first boot"),
                                        ("commit_cut", "right after the commit"), ("streamed", "while payments stream"),
                                        ("soak", "soak")],
                         ids=["download", "install", "firstboot", "commit", "stream", "soak"])
def test_disk_after_cut(journey, stage, what):
    """fsck and integrity_check of the card as the next boot finds it after each such cut
    (not the slot an install was writing)."""
    cuts = [c for c in journey.reach(stage).facts["cuts"] if c["what"].startswith(what)]
    assert cuts and all(c["disk"] == [] for c in cuts), cuts
