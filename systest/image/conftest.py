"""The image's boot test: the flashable image booted under QEMU as a
customer's box would be, boot after boot on one card, with the power cut
where the test says (systest/image/run makes the environment).

One card goes through one journey (Journey.STAGES): provisioned at its
first boot, an update refused five ways and then installed with its power
cut during the download, resumed, tried and committed, a broken update
installed, tried, left by the health check and rolled back, and the box
drained. A test asks for the stage it checks (`journey.reach(NAME)`): run
alone (`-k rolled_back_status`), the stages before it run first, without
the other tests' checks. A stage that failed fails every test after it.

Environment (systest/image/run sets it): SOUNDBOX_IMAGE, the image;
SOUNDBOX_TESTKIT, the folder of the base's test packages (mosquitto and
its clients, never in the image); SOUNDBOX_UPDATE and SOUNDBOX_BAD_UPDATE,
the bundles; SOUNDBOX_TEST_SEED, the random moments of the cuts; and the
LG_IMAGE_* paths of the environment file."""
import base64
import glob
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from lab import Board, until

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
import bootlog  # noqa: E402  (systest/, beside lab)
import disk  # noqa: E402

DEVICE = "counter-7"
K = "/run/testkit"  # the kit, in the guest
UP = "update: system version="  # soundboxd's first words in its log: it is up


def env(name):
    value = os.environ.get(name, "")
    if not value:
        pytest.exit(f"{name} is unset: run systest/image/run", returncode=2)
    return value


def sh(*cmd, **kw):
    """A host command; its output, or the test fails with it."""
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {p.returncode}: {(p.stdout + p.stderr)[-800:]}")
    return p.stdout


class Card:
    """The test card (a copy of the image, 1 GiB bigger: a bigger card),
    its UEFI variables, and the kit shared with the guest: certificates,
    keys, the provisioning folder, the broker's configuration, the test
    packages, the bundles."""

    def __init__(self):
        self.image = env("SOUNDBOX_IMAGE")
        self.path = env("LG_IMAGE_CARD")
        self.kit = env("LG_IMAGE_KIT")
        self.out = f"{self.kit}/out"
        self.board = "generic" if self.image.endswith("-generic-amd64.img") else "rpi"
        layout = sh("bash", "-c", f'. "{REPO}/image/files/usr/lib/soundbox-image/layout"; layout_board {self.board};'
                    ' echo "$part_state $part_root_A $part_root_B"').split()
        self.state, self.root_a, self.root_b = map(int, layout)

    def make(self):
        sh("cp", "--sparse=always", self.image, self.path)
        sh("truncate", "-s", "+1G", self.path)
        if self.board == "generic":
            shutil.copy("/usr/share/OVMF/OVMF_VARS_4M.fd", env("LG_IMAGE_VARS"))
        else:
            # QEMU's own device tree for the machine, to which the played firmware adds /chosen/bootloader.
            dtb = f"{os.path.dirname(self.path)}/virt.dtb"
            sh("qemu-system-aarch64", "-M", f"virt,dumpdtb={dtb}", "-cpu", "cortex-a72", "-smp", "2", "-m", "1024",
               "-accel", "tcg", "-display", "none", "-nic", "none")
            self.virt_dts = sh("dtc", "-q", "-I", "dtb", "-O", "dts", dtb)
        k = self.kit
        for d in ("out", "provision", "tls", "root", "guest"):
            os.makedirs(f"{k}/{d}", exist_ok=True)
        with open(f"{k}/device", "w") as f:
            f.write(DEVICE + "\n")
        with open(f"{k}/tty", "w") as f:  # the test's console: the PC's second serial port, the Pi's one UART
            f.write("ttyS1\n" if self.board == "generic" else "ttyAMA0\n")
        self.certificates()
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "tech@boot-test", "-f", f"{k}/tech_key")
        sh("openssl", "genpkey", "-algorithm", "ed25519", "-out", f"{k}/signing.key")
        sh("openssl", "pkey", "-in", f"{k}/signing.key", "-pubout", "-out", f"{k}/signing.pem")
        p = f"{k}/provision"
        with open(f"{p}/soundbox.conf", "w") as f:
            f.write("# soundbox.conf for the boot test (provisioned from the boot partition)\n"
                    "mqtt.host = localhost\nmqtt.port = 8883\n"
                    "mqtt.tls.ca = /etc/soundbox/tls/ca.crt\nmqtt.tls.cert = /etc/soundbox/tls/device.crt\n"
                    "mqtt.tls.key = /etc/soundbox/tls/device.key\naudio.output = alsa\n"
                    "audio.device = plughw:Loopback,0,0\naudio.volume = 6\npayment.signing = required\n")
        for src, dst in (("tls/ca.crt", "ca.crt"), ("tls/device.crt", "device.crt"), ("tls/device.key", "device.key"),
                         ("tech_key.pub", "authorized_keys"), ("signing.pem", "signing.pem")):
            shutil.copy(f"{k}/{src}", f"{p}/{dst}")
        with open(f"{p}/wifi.conf", "w") as f:
            f.write("ssid=Test Shop\npsk=correct horse battery\ncountry=IN\n")
        with open(f"{p}/hostname", "w") as f:
            f.write(DEVICE + "\n")
        self.mtools("mmd", "::/soundbox", check=False)
        self.mtools("mcopy", "-o", *sorted(glob.glob(f"{p}/*")), "::/soundbox/")
        with open(f"{k}/mosquitto.conf", "w") as f:
            f.write("# The guest's own broker (boot test only): TLS with client certificates.\n"
                    "user root\npersistence false\nlog_dest stderr\nlistener 8883 127.0.0.1\n"
                    f"cafile {K}/tls/ca.crt\ncertfile {K}/tls/server.crt\nkeyfile {K}/tls/server.key\n"
                    "require_certificate true\nallow_anonymous true\nset_tcp_nodelay true\n")
        for deb in glob.glob(f"{env('SOUNDBOX_TESTKIT')}/*.deb"):
            sh("dpkg-deb", "-x", deb, f"{k}/root")
        for src, dst in ((f"{HERE}/guest/harness", "guest/harness"), (f"{HERE}/guest/box", "guest/box"), (f"{HERE}/guest/soak", "guest/soak"),
                         (f"{REPO}/systest/console", "guest/console"), (f"{REPO}/image/test/http-serve", "http-serve")):
            shutil.copy(src, f"{k}/{dst}")
            os.chmod(f"{k}/{dst}", 0o755)
        self.bundles()

    def certificates(self):
        t = f"{self.kit}/tls"
        sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30",
           "-subj", "/CN=soundbox test CA", "-keyout", f"{t}/ca.key", "-out", f"{t}/ca.crt")
        for name, cn, san in (("server", "localhost", "DNS:localhost,IP:127.0.0.1"), ("device", DEVICE, None),
                              ("backend", "backend", None)):
            sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", f"/CN={cn}",
               "-keyout", f"{t}/{name}.key", "-out", f"{t}/{name}.csr")
            ext = []
            if san:
                with open(f"{t}/{name}.ext", "w") as f:
                    f.write(f"subjectAltName={san}\n")
                ext = ["-extfile", f"{t}/{name}.ext"]
            sh("openssl", "x509", "-req", "-in", f"{t}/{name}.csr", "-CA", f"{t}/ca.crt", "-CAkey", f"{t}/ca.key",
               "-CAcreateserial", "-days", "30", *ext, "-out", f"{t}/{name}.crt")

    def bundles(self):
        """The update (the HTTP server's folder: bundle/, with its version
        and sha256), the refused ones, the broken one (badbundle/)."""
        k, good, bad = self.kit, os.environ.get("SOUNDBOX_UPDATE"), os.environ.get("SOUNDBOX_BAD_UPDATE")
        if good:
            os.makedirs(f"{k}/bundle", exist_ok=True)
            link(good, f"{k}/bundle/{os.path.basename(good)}")
            info = sh("rauc", "--no-verify", "info", "--output-format=shell", good)
            self.version = next(line.split("=", 1)[1].strip("'") for line in info.splitlines()
                                if line.startswith("RAUC_MF_VERSION="))
            with open(good, "rb") as f:
                self.sha256 = hashlib.file_digest(f, "sha256").hexdigest()
            self.bundle_name = os.path.basename(good)
            for name, value in (("name", self.bundle_name), ("version", self.version), ("sha256", self.sha256)):
                with open(f"{k}/bundle/{name}", "w") as f:
                    f.write(value + "\n")
            arch = "amd64" if self.board == "generic" else "arm64"
            sh(f"{REPO}/image/test/refused-bundles", f"{k}/refused", self.board, arch, f"{self.version}+refused")
        if bad:
            os.makedirs(f"{k}/badbundle", exist_ok=True)
            link(bad, f"{k}/badbundle/{os.path.basename(bad)}")
            self.bad_name = os.path.basename(bad)

    def firmware(self, tryboot):
        """The Pi firmware's part of a boot, played (QEMU cannot run it):
        the partition autoboot.txt names (its [tryboot] one with TRYBOOT:
        the reboot before was asked with "0 tryboot", which the image's
        tryboot module passes to the firmware),
        its kernel and initrd where the environment file takes them, and
        QEMU's device tree with /chosen/bootloader saying what was started.
        Returns the kernel command line: the partition's cmdline.txt, the
        kernel's console on the virtio console, the test's units as
        credentials."""
        fat = f"{self.path}@@{self.offset(1)[0]}"
        part = int(sh("bash", "-c", f'. "{REPO}/image/lib.sh"; rpi_firmware_partition "$1" "$2"', "_", fat,
                      "1" if tryboot else "0").strip())
        spec = f"{self.path}@@{self.offset(part)[0]}"
        names = sh("mdir", "-b", "-i", spec, "::/", env={**os.environ, "MTOOLS_SKIP_CHECK": "1"}).split()
        kernel = next((n for n in names if n.startswith("::/vmlinuz-")), None)
        initrd = next((n for n in names if n.startswith("::/initrd.img-")), None)
        assert kernel and initrd, f"no vmlinuz-*/initrd.img-* on partition {part}: {names}"
        for src, dst in ((kernel, env("LG_IMAGE_KERNEL")), (initrd, env("LG_IMAGE_INITRD"))):
            sh("mcopy", "-o", "-n", "-i", spec, src, dst, env={**os.environ, "MTOOLS_SKIP_CHECK": "1"})
        cmdline = sh("mtype", "-i", spec, "::/cmdline.txt", env={**os.environ, "MTOOLS_SKIP_CHECK": "1"})
        dts = self.virt_dts + f"/ {{ chosen {{ bootloader {{ partition = <{part}>; tryboot = <{int(tryboot)}>; }}; }}; }};\n"
        sh("dtc", "-q", "-I", "dts", "-O", "dtb", "-o", env("LG_IMAGE_DTB"), "-", input=dts)
        units = " ".join(f"systemd.set_credential_binary={name}:{b64(f'{HERE}/guest/{file}', bare=True)}" for name, file in (
            ("systemd.extra-unit.soundbox-test-harness.service", "soundbox-test-harness.service"),
            ("systemd.extra-unit.soundbox-test-console.service", "soundbox-test-console.service"),
            ("systemd.unit-dropin.multi-user.target", "multi-user.conf")))
        args = " ".join(x for x in cmdline.replace("\r", " ").split() if not x.startswith("console="))
        print(f"the firmware (played) starts partition {part}{', tryboot' if tryboot else ''}")
        line = f"{args} console=hvc0 panic=-1 {units}"
        # The arm64 kernel keeps 2048 bytes of its command line and drops the rest (a credential cut off).
        assert len(line) < 2048, f"the kernel command line is {len(line)} bytes, over arm64's 2047: shorten the test's units"
        return line

    def offset(self, part):
        t = json.loads(sh("sfdisk", "-J", self.path))["partitiontable"]
        p = t["partitions"][part - 1]
        return p["start"] * t.get("sectorsize", 512), p["size"] * t.get("sectorsize", 512)

    def mtools(self, tool, *args, check=True):
        """An mtools command on the boot partition (the card's first)."""
        fat = f"{self.path}@@{self.offset(1)[0]}"
        p = subprocess.run([tool, "-i", fat, *args], capture_output=True, text=True,
                           env={**os.environ, "MTOOLS_SKIP_CHECK": "1"})
        if check and p.returncode != 0:
            raise AssertionError(f"{tool} {' '.join(args)}: {p.stderr.strip()}")
        return p.stdout

    def check(self, label, writing=None):
        """fsck and integrity_check of the card as the next boot finds it
        (systest/disk.py); WRITING, a slot an install was writing at a cut,
        is passed over. The findings that failed."""
        skip = {"A": self.root_a, "B": self.root_b}.get(writing)
        found = disk.check(self.path, label, self.state, [self.root_a, self.root_b], skip, os.path.dirname(self.path))
        return [f"{name}: {detail}" for ok, name, detail in found if not ok]


def b64(path, bare=False):
    """PATH in base64; BARE: without its comment lines (the kernel command line is short)."""
    with open(path, "rb") as f:
        data = f.read()
    if bare:
        data = b"".join(x for x in data.splitlines(keepends=True) if not x.startswith(b"#"))
    return base64.b64encode(data).decode()


def link(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy(src, dst)


class Box:
    """The booted image, reached through labgrid: its power, its console's
    shell, and what it wrote into the share. Boot N's logs:
    out/receipts-N.log, out/journal-N.log, out/boot-N.txt (the harness)."""

    def __init__(self, strategy, card):
        self.strategy, self.card = strategy, card
        self.n = 0
        self.shell = None
        self.started = {}  # boot: the failed start job's line, or ""

    # -- power ---------------------------------------------------------------
    def power_on(self, hold=False, shell=True):
        """Boot N+1; with HOLD, soundboxd waits for release(); without
        SHELL, nobody logs in (the boot may be cut before its login)."""
        self.n += 1
        k = self.card.kit
        with open(f"{k}/boot", "w") as f:
            f.write(f"{self.n}\n")
        if hold:
            open(f"{k}/hold", "w").close()
        elif os.path.exists(f"{k}/hold"):
            os.remove(f"{k}/hold")
        with open(env("LG_IMAGE_CONSOLE"), "a") as f:
            f.write(f"\n===== boot {self.n} =====\n")
        if self.card.board == "rpi":
            args = self.card.firmware("tryboot" in self.reboot_argument(self.n - 1))
            # The command line is QEMUDriver's at its activation: made again for this boot.
            self.strategy.target.deactivate(self.strategy.power)
            self.strategy.power.boot_args = args
        self.strategy.transition("shell" if shell else "on")
        self.shell = Board(self.strategy.shell) if shell else None

    def running(self):
        return self.strategy.running()

    def reboot_argument(self, n):
        """The argument boot N's reboot was asked with ("0 tryboot" on the
        Pi's try: the harness keeps systemd's reboot-param at its stop);
        empty after a power cut or a plain reboot."""
        return bootlog.read(f"{self.card.out}/reboot-{n}.txt").strip()

    def release(self):
        open(f"{self.card.out}/release-{self.n}", "w").close()

    def cut(self):
        """The power cut (QMP quit: no warning to the guest)."""
        self.strategy.cut()
        self.shell = None

    def poweroff(self, timeout=300):
        self.shell.run("systemctl poweroff &")
        self.await_off(timeout, "a poweroff")

    def let_reboot(self):
        """soundboxd's reboot, held (its path unit stopped), let go: from
        the background, so that the console answers before it goes."""
        self.check("sync; (sleep 1; systemctl start soundbox-update-reboot.path) >/dev/null 2>&1 &")

    def until_or_off(self, what, condition, timeout):
        """Polls CONDITION over the shell until it holds (True), or until
        the box turns itself off meanwhile (False: a reboot it chose)."""
        def check():
            try:
                return "off" if not self.running() else ("yes" if condition() else None)
            except Exception:
                if not self.running():
                    return "off"
                raise
        if until(what, check, timeout, interval=2) == "off":
            self.await_off(10, "end")
            return False
        return True

    def await_off(self, timeout, why):
        """The box turns itself off (a reboot or a poweroff) within TIMEOUT."""
        if not self.strategy.await_off(timeout):
            self.cut()
            raise AssertionError(f"boot {self.n}: no {why} within {timeout} s ({self.tail()})")
        self.shell = None

    # -- the shell -------------------------------------------------------------
    def run(self, cmd, timeout=60):
        return self.shell.run(cmd, timeout=timeout)

    def check(self, cmd, timeout=60):
        return self.shell.check(cmd, timeout=timeout)

    def ok(self, cmd, timeout=60):
        return self.run(cmd, timeout)[0] == 0

    def ctl(self, args, timeout=60):
        return self.run(f"soundboxctl {args}", timeout)[1]

    def status(self):
        """soundboxctl status as {key: value}."""
        return fields(self.ctl("status"))

    def update_status(self):
        return fields(self.ctl("update status"))

    def slots(self):
        return fields(self.check("/usr/lib/soundbox-image/slots show"), sep="=")

    def box(self, args, timeout=60):
        return self.check(f"{K}/guest/box {args}", timeout)

    def pay(self, pid, amount):
        self.box(f"pay {shlex.quote(pid)} {amount}")

    def await_ready(self, timeout=300):
        """soundboxd up (Type=notify: active once it said READY)."""
        until(lambda: f"boot {self.n}: soundboxd active ({self.tail()})",
              lambda: self.ok("systemctl is-active -q soundboxd"), timeout, interval=1)
        self.mark("READY")
        # Figures for bench/image: when soundboxd was up, what it holds.
        ready_us = self.check("systemctl show -P ActiveEnterTimestampMonotonic soundboxd.service").strip()
        self.fact("boot_to_ready_s", f"{int(ready_us or 0) / 1e6:.1f}")
        self.fact("daemon_rss_kb", self.check("ps -o rss= -C soundboxd").strip())
        if os.environ.get("SOUNDBOX_BOOT_ANALYZE") == "1":
            self.run(f"systemd-analyze critical-chain soundboxd.service > {K}/out/chain-{self.n}.txt 2>&1; "
                     f"systemd-analyze blame > {K}/out/blame-{self.n}.txt 2>&1", timeout=120)
        log = self.check("journalctl -b -o cat -u soundboxd.service")
        self.started[self.n] = next((x for x in log.splitlines() if "Dependency failed for soundboxd" in x), "")

    def await_state(self, pattern, timeout):
        """soundboxctl update status's state begins with PATTERN (a regex)."""
        return until(lambda: f"boot {self.n}: update state /{pattern}/ (now: {self.update_status()})",
                     lambda: re.match(f"(?:{pattern})", self.update_status().get("state", "")), timeout, interval=2)

    def connected(self):
        return self.status().get("mqtt", "").startswith("connected")

    # -- the logs --------------------------------------------------------------
    def log(self, kind, n=None):
        return bootlog.read(f"{self.card.out}/{kind}-{n or self.n}.log")

    def booted(self, n=None):
        return bootlog.read(f"{self.card.out}/boot-{n or self.n}.txt")

    def fact(self, name, value):
        """A figure of this boot, for bench/image (out/facts.txt: "boot-N NAME VALUE")."""
        with open(f"{self.card.out}/facts.txt", "a") as f:
            f.write(f"boot-{self.n} {name} {value}\n")

    def mark(self, what):
        with open(f"{self.card.out}/boot-{self.n}.txt", "a") as f:
            f.write(f"{what} boot={self.n}\n")

    def tail(self, n=8):
        lines = self.log("journal").splitlines()[-n:]
        return "soundboxd's log: " + (" | ".join(lines) if lines else "empty")


def fields(text, sep=":"):
    out = {}
    for line in text.splitlines():
        if sep in line:
            key, value = line.split(sep, 1)
            out[key.strip()] = value.strip()
    return out


class Journey:
    """One card's life, stage by stage (each a stage_ method). The facts a
    stage gathers for the tests go into self.facts. The PC's journey:
    the update cut during its download, then a broken update rolled back.
    The Pi's (its lane takes as long): the update cut during its
    download, its install, the new slot's first boot and right after the
    commit, then a cut while payments stream."""

    STAGES = {
        "generic": ["first", "first_off", "install_cut", "resumed", "tried", "bad_installed", "bad_tried",
                    "rolled_back", "drain_boot", "drained"],
        "rpi": ["first", "first_off", "install_cut", "install_cut2", "resumed", "firstboot_cut", "retried", "tried",
                "commit_cut", "streamed", "drain_boot", "drained"],
        # The soaks (image/soak-power, image/soak-update): SOUNDBOX_CUTS cuts.
        "power": ["first", "first_off", "streamed", "drain_boot", "drained"],
        "update": ["first", "first_off", "soak", "settled"],
    }

    def __init__(self, strategy, card):
        self.card = card
        self.box = Box(strategy, card)
        self.name = os.environ.get("SOUNDBOX_JOURNEY") or card.board
        self.stages = self.STAGES[self.name]
        self.cuts_wanted = int(os.environ.get("SOUNDBOX_CUTS") or 1)
        self.done = -1
        self.failed = None
        self.facts = {"cuts": []}
        self.random = random.Random(int(os.environ.get("SOUNDBOX_TEST_SEED", "0")) or None)

    def reach(self, stage):
        if stage not in self.stages:
            pytest.skip(f"not on the {self.name} journey")
        want = self.stages.index(stage)
        while self.done < want:
            if self.failed:
                pytest.fail(f"an earlier stage failed: {self.failed}", pytrace=False)
            name = self.stages[self.done + 1]
            began = time.monotonic()
            try:
                getattr(self, "stage_" + name)()
            except BaseException as e:
                self.failed = f"{name}: {e}"
                raise
            print(f"\nstage {name}: done at boot {self.box.n} in {time.monotonic() - began:.0f} s", flush=True)
            self.done += 1
        return self

    def cut(self, what):
        """The power cut now; the card checked as the next boot finds it
        (not the slot an install was writing)."""
        b = self.box
        b.cut()
        # (soundboxd was up when it had logged its first words, whether or not the test logged in)
        logs = b.log("receipts") + b.booted() + ("\nREADY" if UP in b.log("journal") else "")
        self.facts["cuts"].append(dict(what=what, boot=b.n, hit=bootlog.hit(logs),
                                       disk=self.card.check(f"cut{len(self.facts['cuts']) + 1}", bootlog.writing_slot(logs))))
        print(f"boot {b.n}: the power cut {what} ({bootlog.hit(logs)})")

    # -- boot 1 ----------------------------------------------------------------
    def stage_first(self):
        self.card.make()
        self.box.power_on()
        self.box.await_ready()

    def stage_first_off(self):
        self.box.poweroff()

    # -- the update ------------------------------------------------------------
    def stage_install_cut(self):
        """The refused bundles by hand, then the update as the backend
        sends it; the power cut during its download, at 10-80 %, once the
        payment sent during it was played."""
        b = self.box
        b.power_on()
        b.await_ready()
        refused = {}
        other = "B" if b.slots().get("current") == "A" else "A"
        dev = f"/dev/disk/by-partuuid/5b0c0001-0{self.card.root_b if other == 'B' else self.card.root_a}"
        fingerprint = f"/usr/lib/soundbox-image/slots show; dd if={dev} bs=1M count=16 status=none | sha256sum"
        for name in ("wrong-key", "other-board", "older", "tampered", "truncated"):
            before = b.check(fingerprint, timeout=120)
            rc, out = b.run(f"soundboxctl update install {K}/refused/{name}.raucb --wait", timeout=300)
            refused[name] = dict(rc=rc, out=out, reason=b.update_status().get("reason", ""),
                                 same=before == b.check(fingerprint, timeout=120),
                                 copy_left=b.ok(f"test -e /var/lib/soundbox/update/{name}.raucb"))
        self.facts["refused"] = refused
        b.pay(f"U{b.n}-before", "1.11")
        cmd = json.dumps({"cmd": "update", "id": f"UPD-{b.n}", "url": f"http://127.0.0.1:8080/{self.card.bundle_name}",
                          "sha256": self.card.sha256, "version": self.card.version}, separators=(",", ":"))
        b.box(f"cmd {shlex.quote(cmd)}")
        b.await_state("downloading", 120)
        b.pay(f"U{b.n}-during", "2.22")
        at = self.random.randint(10, 80)
        self.facts["install_boot"] = b.n
        until(lambda: f"boot {b.n}: U{b.n}-during played and the download at {at} %",
              lambda: (f'"id":"U{b.n}-during","status":"played"' in b.log("receipts")
                       and progressed(b.log("receipts"), "downloading", at)), 900, interval=0.5)
        self.cut(f"during the download ({at} %)")
        self.facts["download_over"] = f'"id":"UPD-{b.n}","kind":"update","status":"installing"' in b.log("receipts")

    def stage_install_cut2(self):
        """The download resumed; the power cut during the install, at 10-90 %."""
        b = self.box
        b.power_on()
        at = self.random.randint(10, 90)
        until(lambda: f"boot {b.n}: the install at {at} % ({b.tail()})",
              lambda: progressed(b.log("receipts"), "installing", at), 1500, interval=0.5)
        self.cut(f"during the install ({at} %)")

    def stage_resumed(self):
        """soundboxd carries on by itself (the download with a Range
        request, an install from the start), arms the other slot and
        reboots into it."""
        b = self.box
        b.power_on()
        b.await_ready()
        b.check("systemctl stop soundbox-update-reboot.path")  # held until the checks below are done
        b.await_state("waiting to reboot|failed", 1500)
        self.facts["resumed"] = dict(status=b.update_status(), slots=b.slots(),
                                     rauc=b.run("journalctl -b -o cat -u rauc", timeout=60)[1])
        b.let_reboot()
        b.await_off(300, "reboot into the update")
        self.facts["reboot"] = b.reboot_argument(b.n)

    def stage_firstboot_cut(self):
        """The new slot's first boot, cut before soundboxd starts (so before any verdict)."""
        b = self.box
        b.power_on(hold=True)
        until("soundbox-boot-reason.service done", lambda: b.ok("systemctl is-active -q soundbox-boot-reason.service"), 120)
        until("the harness holding soundboxd", b.booted, 120)
        self.facts["firstboot"] = b.slots()
        self.cut("during the new slot's first boot")

    def stage_retried(self):
        """Back on the old slot after that cut: soundboxd tries again (2 of 3) by itself."""
        b = self.box
        # soundboxd, held until its reboot is held too, asks for it at once: read first what it decided.
        b.power_on(hold=True)
        b.check("systemctl stop soundbox-update-reboot.path")
        b.release()
        b.await_ready()
        until(lambda: f"boot {b.n}: soundboxd trying again ({b.update_status()})",
              lambda: "trying again" in b.update_status().get("reason", ""), 60, interval=2)
        self.facts["retried"] = dict(slots=b.slots(), update=b.update_status())
        b.let_reboot()
        b.await_off(300, "reboot into the update again")

    def stage_tried(self):
        """On the new slot, on trial; soundboxd commits it."""
        b = self.box
        b.power_on()
        b.await_ready()
        self.facts["tried"] = dict(slots=b.slots(), version=b.check("dpkg-query -W -f='${Version}' soundbox"),
                                   root=b.check("readlink -f $(findmnt -no SOURCE /)").strip(),
                                   connected=until("soundboxd connected on the new slot", b.connected, 60))
        b.await_state("committed", 180)
        self.facts["committed"] = dict(slots=b.slots(), status=b.status())

    def stage_commit_cut(self):
        self.cut("right after the commit")

    def stage_streamed(self):
        """Payments stream, one a second, until the power is cut at a
        random moment 4-16 s in; once on the Pi's journey (its first boot
        also shows the commit before it held), SOUNDBOX_CUTS times on the
        power soak's."""
        b = self.box
        self.facts["first_stream"] = b.n + 1
        for k in range(self.cuts_wanted if self.name == "power" else 1):
            b.power_on()
            b.await_ready()
            if k == 0:
                self.facts["after_commit_cut"] = b.slots()
            b.shell.spawn(f"k=0; while :; do k=$((k + 1)); {K}/guest/box pay C{b.n}-$k $((k % 9 + 1)).00; sleep 1; done",
                          f"{K}/out/stream-{b.n}.log")
            time.sleep(self.random.randint(4, 16))  # the random moment of the cut (the point of the test)
            self.cut("while payments stream")

    # -- the soak of updates ---------------------------------------------------------
    SOAK = [("download", 30), ("install", 120), ("firstboot", 30), ("commit", 5)]

    def began(self, target):
        """This boot has reached the start of TARGET (its logs say so)."""
        b = self.box
        receipts, booted = b.log("receipts"), b.booted()
        up = UP in b.log("journal")
        return {"download": '"kind":"update","status":"downloading"' in receipts,
                "install": '"kind":"update","status":"installing"' in receipts,
                "firstboot": "tried=yes" in booted,
                "commit": "tried=yes" in booted and up}[target]

    def stage_soak(self):
        """Updates asked for again and again (guest/soak), the power cut at
        a random moment of each target in turn: the download, the install,
        the new slot's first 30 s, the 5 s after its soundboxd is up
        (around its commit). A boot that reboots by itself before its
        target (soundboxd rebooting into the update) is followed by the
        next with the same target. Only soundboxd reboots a box here, and
        only once it is up."""
        b = self.box
        open(f"{self.card.kit}/soak", "w").close()
        self.facts["first_stream"] = b.n + 1
        self.facts["soak_reboots"] = []
        t = 0
        while t < self.cuts_wanted:
            target, most = self.SOAK[t % len(self.SOAK)]
            b.power_on(shell=False)
            until(lambda: f"boot {b.n}: no {target} ({b.tail()})",
                  lambda: self.began(target) or not b.running(), 1800, interval=0.5)
            if b.running():
                time.sleep(self.random.uniform(0, most))  # the random moment of the cut (the point of the test)
            if not b.running():
                b.await_off(10, "end")
                self.facts["soak_reboots"].append((b.n, UP in b.log("journal")))
                continue
            self.cut(f"soak: {target}")
            t += 1
        os.remove(f"{self.card.kit}/soak")

    def stage_settled(self):
        """No new update; the one under way ends (rebooting meanwhile), the
        queue empties: the box on its default slot, the update committed
        (or rolled back), connected. Within 6 boots."""
        b = self.box
        under_way = r"(downloading|installing|waiting to reboot|trying)"
        for _ in range(6):
            b.power_on(hold=True)  # logged in before soundboxd, which may reboot the box at once
            b.release()
            if not b.until_or_off(lambda: f"boot {b.n}: soundboxd up, the update under way ended ({b.update_status()})",
                                  lambda: b.ok("systemctl is-active -q soundboxd")
                                  and not re.match(under_way, b.update_status().get("state", "")), 1800):
                continue
            self.facts["settled"] = dict(drained=b.run("soundboxctl wait --timeout 600", timeout=660),
                                         slots=b.slots(), update=b.update_status(), connected=b.connected())
            b.poweroff()
            break
        else:
            raise AssertionError("the box did not settle in 6 boots")
        self.facts["disk_final"] = self.card.check("soak_final")

    # -- the broken update (the PC) --------------------------------------------------
    def stage_bad_installed(self):
        """Still the tried boot: the broken update installed by hand (a
        technician's stick), the box rebooted into it."""
        b = self.box
        other = "B" if b.slots().get("current") == "A" else "A"
        self.facts["bad_slot"] = other
        self.facts["bad_boot"] = b.n
        b.pay(f"U{b.n}-before", "1.11")
        b.check("systemctl stop soundbox-update-reboot.path")
        b.shell.spawn(f"soundboxctl update install {K}/badbundle/{self.card.bad_name} --wait", f"{K}/out/bad-install-{b.n}.log")
        b.await_state("downloading|installing|waiting to reboot", 300)
        b.pay(f"U{b.n}-during", "2.22")
        b.await_state("waiting to reboot|failed", 1500)
        self.facts["bad_install"] = b.update_status()
        b.let_reboot()
        b.await_off(300, "reboot into the broken update")
        self.facts["disk_update"] = self.card.check("update")

    def stage_bad_tried(self):
        """The broken slot on trial (held before soundboxd, checked), then
        left by the health check at soundboxd's 5th failed start."""
        b = self.box
        b.power_on(hold=True)
        self.facts["bad_tried"] = b.slots()
        b.release()
        b.await_off(300, "rollback by the health check")

    def stage_rolled_back(self):
        """Back on the good slot, "rolled back" with the reason."""
        b = self.box
        self.second_key()
        b.power_on()
        b.await_ready()
        b.await_state("rolled back", 60)
        self.facts["rolled_back"] = dict(slots=b.slots(), update=b.update_status(), status=b.status(),
                                         doctor=b.ctl("doctor"))
        b.pay(f"R{b.n}-after", "3.33")
        b.ctl("wait --timeout 120", timeout=150)
        self.facts["history"] = b.ctl("history --limit 5")

    # -- the end -------------------------------------------------------------------
    def stage_drain_boot(self):
        """The boot that drains the box: the rollback's on the PC, a boot of its own after the cuts on the Pi."""
        b = self.box
        if b.shell is None:
            self.second_key()
            b.power_on()
            b.await_ready()
        self.facts["drain_slots"] = b.slots()
        self.facts["drain_status"] = b.status()

    def stage_drained(self):
        """The queue emptied, the box powered off; its card checked."""
        b = self.box
        self.facts["drained"] = b.run("soundboxctl wait --timeout 900", timeout=960)
        b.poweroff()
        self.facts["started"] = dict(b.started)
        self.facts["disk_final"] = self.card.check("final")

    def second_key(self):
        """A later provisioning: a technician adds a second SSH key to the card."""
        k = self.card.kit
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "tech2@boot-test", "-f", f"{k}/tech2_key")
        with open(f"{k}/authorized_keys.2", "w") as f:
            f.write(open(f"{k}/tech_key.pub").read() + open(f"{k}/tech2_key.pub").read())
        self.card.mtools("mcopy", "-o", f"{k}/authorized_keys.2", "::/soundbox/authorized_keys")

    def not_spoken_once(self, boot):
        """Of the payments sent before and during an install on BOOT
        (U<boot>-before, U<boot>-during), those not started exactly once
        (soundboxd's log) with a played receipt, over every boot."""
        n = self.box.n
        journals = [self.box.log("journal", k) for k in range(1, n + 1)]
        receipts = [self.box.log("receipts", k) for k in range(1, n + 1)]
        found = {pid: bootlog.spoken(journals, receipts, pid) for pid in (f"U{boot}-before", f"U{boot}-during")}
        return [f"{pid}: spoken {s} times, {p} played receipts" for pid, (s, p) in found.items() if not (s == 1 and p >= 1)]


def progressed(receipts, status, at):
    return any(int(p) >= at for p in re.findall(rf'"status":"{status}","progress":([0-9]+)', receipts))


@pytest.fixture(scope="session")
def journey(strategy):
    return Journey(strategy, Card())


@pytest.fixture
def first(journey):
    """The box at its first boot, up (soundboxd ready)."""
    return journey.reach("first").box
