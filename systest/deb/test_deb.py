"""The device packages (image/build-deb) installed, run, upgraded and
purged the way a user meets them, in fresh trixie chroots; the arm64 one
read with dpkg-deb. In this file's order the install's checks come first,
then the upgrade, then the purge (conftest.py's `installed`)."""
import os
import re
import signal
import subprocess
import tempfile

from lab import until

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def dpkg_field(deb, field):
    return subprocess.run(["dpkg-deb", "-f", deb, field], capture_output=True, text=True, check=True).stdout.strip()

def test_install(installed):
    assert installed.apt_log.count("Setting up") >= 1, installed.apt_log[-400:]

def test_user(installed):
    uid = int(installed.run("id -u soundbox", check=True)[1])
    groups = installed.run("id -nG soundbox", check=True)[1].split()
    assert uid < 1000, f"soundbox is uid {uid}: not a system user"
    assert {"soundbox", "audio", "gpio"} <= set(groups), f"soundbox's groups: {groups}"

def test_unit_enabled(installed):
    assert os.path.islink(installed.file("/etc/systemd/system/multi-user.target.wants/soundboxd.service"))

def test_unit_installed(installed):
    assert os.path.isfile(installed.file("/usr/lib/systemd/system/soundboxd.service"))

def test_state_dir(installed):
    assert installed.owner("/var/lib/soundbox") == "soundbox:soundbox 750"

def test_conffile(installed):
    assert installed.owner("/etc/soundbox/soundbox.conf") == "root:soundbox 640"
    with open(installed.file("/var/lib/dpkg/info/soundbox.conffiles"), encoding="utf-8") as f:
        assert "/etc/soundbox/soundbox.conf" in f.read().split("\n")

def test_config_valid(installed):
    """The shipped soundbox.conf passes soundboxd --check-config."""
    installed.run("soundboxd --check-config --config /etc/soundbox/soundbox.conf", check=True)

def test_voices(installed):
    """Every pack of the checkout's voices/, whole: as many clips as the checkout's."""
    shipped = installed.file("/usr/share/soundbox/voices")
    packs = sorted(d for d in os.listdir(f"{REPO}/voices") if os.path.isfile(f"{REPO}/voices/{d}/manifest.json"))
    assert len(packs) >= 14
    for p in packs:
        assert os.path.isdir(f"{shipped}/{p}"), f"voice pack {p} missing from the package"
        assert len(os.listdir(f"{shipped}/{p}")) == len(os.listdir(f"{REPO}/voices/{p}")), f"voice pack {p} is not whole"

def test_man_pages(installed):
    for page in ("man8/soundboxd.8.gz", "man1/soundboxctl.1.gz", "man5/soundbox.conf.5.gz"):
        assert os.path.isfile(installed.file(f"/usr/share/man/{page}")), page

def test_completion(installed):
    assert os.path.isfile(installed.file("/usr/share/bash-completion/completions/soundboxctl"))

def test_runs_as_soundbox(installed):
    """The daemon as the service would run it (no systemd in a chroot): as
    soundbox, with the packaged settings, answering soundboxctl."""
    r = installed
    os.makedirs(r.file("/run/soundbox"), exist_ok=True)
    r.run("chown soundbox:soundbox /run/soundbox", check=True)
    log = open(r.file("/tmp/soundboxd.log"), "w", encoding="utf-8")
    launcher = subprocess.Popen(["chroot", r.path, "runuser", "-u", "soundbox", "--", "soundboxd",
                                 "--config", "/etc/soundbox/soundbox.conf"], stderr=log, stdout=log)
    try:
        until("soundboxd's control socket", lambda: os.path.exists(r.file("/run/soundbox/control.sock")), 10, 0.1)
        rc, status = r.run("soundboxctl status")
        assert rc == 0 and re.search(r"^version:", status, re.M), status
        # This test's daemon only: the soundboxd whose root is this chroot.
        real = os.path.realpath(r.path)
        pids = [p for p in subprocess.run(["pgrep", "-x", "soundboxd"], capture_output=True, text=True).stdout.split()
                if os.path.realpath(f"/proc/{p}/root") == real]
        assert pids, "no soundboxd runs in the root"
        with open(f"/proc/{pids[0]}/status", encoding="utf-8") as f:
            runs_as = int(re.search(r"^Uid:\s+(\d+)", f.read(), re.M).group(1))
        assert runs_as == int(r.run("id -u soundbox", check=True)[1])
        os.kill(int(pids[0]), signal.SIGTERM)
        launcher.wait(timeout=10)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        log.close()

def test_upgrade_keeps_conffile(installed, deb_amd64):
    """A newer package over a locally edited conffile: dpkg's question
    answered by policy (keep the local file); the new one beside it."""
    r = installed
    version = dpkg_field(deb_amd64, "Version")
    with tempfile.TemporaryDirectory(prefix="sbdeb-new.") as new:
        pkg = f"{new}/pkg"
        subprocess.run(["dpkg-deb", "-R", deb_amd64, pkg], check=True)
        control = open(f"{pkg}/DEBIAN/control", encoding="utf-8").read()
        with open(f"{pkg}/DEBIAN/control", "w", encoding="utf-8") as f:
            f.write(re.sub(r"^Version: .*$", f"Version: {version}+upgradetest", control, flags=re.M))
        with open(f"{pkg}/etc/soundbox/soundbox.conf", "a", encoding="utf-8") as f:
            f.write("# a line added by the upgrade test's newer package\n")
        subprocess.run("find . -type f ! -path './DEBIAN/*' -printf '%P\\0' | sort -z | xargs -0 md5sum > DEBIAN/md5sums",
                       shell=True, cwd=pkg, check=True)
        newer = f"{new}/soundbox_{version}+upgradetest_amd64.deb"
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", pkg, newer], check=True, capture_output=True)
        with open(r.file("/etc/soundbox/soundbox.conf"), "a", encoding="utf-8") as f:
            f.write("audio.volume = 9   # the technician's own line\n")
        r.install(newer, "-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold")
    assert r.run("dpkg-query -W -f='${Version}' soundbox")[1] == f"{version}+upgradetest"
    assert "the technician's own line" in open(r.file("/etc/soundbox/soundbox.conf"), encoding="utf-8").read()
    assert "upgrade test's newer package" in open(r.file("/etc/soundbox/soundbox.conf.dpkg-dist"), encoding="utf-8").read()

def test_purge(installed):
    """Purge removes the state (a database included) and the settings, and
    the conffile's statoverride."""
    r = installed
    os.makedirs(r.file("/var/lib/soundbox/x"), exist_ok=True)
    open(r.file("/var/lib/soundbox/soundbox.db"), "w").close()
    r.run("apt-get purge -y -qq soundbox", check=True)
    assert not os.path.exists(r.file("/etc/soundbox"))
    assert not os.path.exists(r.file("/var/lib/soundbox"))
    assert r.run("dpkg-statoverride --list /etc/soundbox/soundbox.conf")[0] != 0

# --- arm64: what dpkg-deb says -------------------------------------------------

def test_arm64_contents(deb_arm64):
    listing = subprocess.run(["dpkg-deb", "-c", deb_arm64], capture_output=True, text=True, check=True).stdout
    files = {line.split()[5] for line in listing.splitlines() if len(line.split()) >= 6}
    for f in ("./usr/bin/soundboxd", "./usr/bin/soundboxctl", "./usr/lib/systemd/system/soundboxd.service",
              "./usr/share/soundbox/voices/zh-CN/manifest.json", "./etc/soundbox/soundbox.conf",
              "./usr/share/man/man8/soundboxd.8.gz"):
        assert f in files, f"{f} is not in the arm64 package"

def test_arm64_binary(deb_arm64):
    assert dpkg_field(deb_arm64, "Architecture") == "arm64"
    with tempfile.TemporaryDirectory(prefix="sbdeb-arm.") as ex:
        subprocess.run(["dpkg-deb", "-x", deb_arm64, ex], check=True)
        with open(f"{ex}/usr/bin/soundboxd", "rb") as f:
            header = f.read(20)
    assert header[:4] == b"\x7fELF" and int.from_bytes(header[18:20], "little") == 0xB7, "not an aarch64 ELF"

def test_arm64_depends(deb_arm64):
    deps = dpkg_field(deb_arm64, "Depends")
    for lib in ("libc6", "libasound2t64", "libgpiod3", "libmosquitto1", "libmpg123-0t64", "libsqlite3-0", "libstdc++6"):
        assert f"{lib} (>= " in deps, f"{lib} with a minimum version is not in Depends: {deps}"

def test_depends_same_as_amd64(deb_arm64, deb_amd64):
    names = lambda deb: sorted(re.sub(r" \(.*", "", d.strip()) for d in dpkg_field(deb, "Depends").split(","))
    assert names(deb_arm64) == names(deb_amd64)
