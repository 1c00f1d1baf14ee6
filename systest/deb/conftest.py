"""The packages as a user meets them: each test in a fresh Debian 13
trixie chroot, unpacked from the cached base tarball image/test-deb makes.

image/test-deb sets SOUNDBOX_DEB_BASE (the tarball), SOUNDBOX_DEB_AMD64
and SOUNDBOX_DEB_ARM64 (the packages image/build-deb made). No systemd
runs in a chroot: the daemon is started as its unit would start it."""
import os
import shlex
import shutil
import subprocess
import tempfile

import pytest

ENV = "/usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive"


def setting(name):
    value = os.environ.get(name)
    if not value:
        pytest.exit(f"{name} is unset: run image/test-deb", returncode=2)
    return value


class Root:
    """A fresh trixie root with /proc and /dev mounted; removed at the end."""

    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="sbdeb.", dir=os.environ.get("TMPDIR", "/tmp"))
        try:
            subprocess.run(["tar", "-xf", setting("SOUNDBOX_DEB_BASE"), "-C", self.path], check=True)
            subprocess.run(["mount", "-t", "proc", "proc", f"{self.path}/proc"], check=True)
            subprocess.run(["mount", "--bind", "/dev", f"{self.path}/dev"], check=True)
            shutil.copy("/etc/resolv.conf", f"{self.path}/etc/resolv.conf")
        except BaseException:
            self.remove()
            raise

    def file(self, path):
        return self.path + path

    def run(self, cmd, check=False):
        """CMD (a shell line) inside the root, as root: (exit status, output)."""
        p = subprocess.run(["chroot", self.path, "/bin/sh", "-c", f"{ENV} sh -c {shlex.quote(cmd)}"],
                           capture_output=True, text=True)
        out = (p.stdout + p.stderr).strip()
        if check and p.returncode != 0:
            raise AssertionError(f"in the root, {cmd!r} exited {p.returncode}: {out[-600:]}")
        return p.returncode, out

    def install(self, deb, *options):
        """apt-get install of a package file (its dependencies from the mirror): the log."""
        shutil.copy(deb, self.file("/tmp/"))
        self.run("apt-get update -qq")
        rc, log = self.run(f"apt-get install -y -qq --no-install-recommends {' '.join(options)} /tmp/{os.path.basename(deb)}")
        assert rc == 0, f"apt-get install {os.path.basename(deb)} failed: {log[-600:]}"
        return log

    def owner(self, path):
        """'user:group mode' as the root names them (the host's names differ)."""
        st = os.stat(self.file(path))
        user = self.run(f"getent passwd {st.st_uid} | cut -d: -f1")[1]
        group = self.run(f"getent group {st.st_gid} | cut -d: -f1")[1]
        return f"{user}:{group} {st.st_mode & 0o7777:o}"

    def remove(self):
        real = os.path.realpath(self.path)
        with open("/proc/self/mounts", encoding="utf-8") as f:
            mounts = [line.split()[1] for line in f]
        for m in sorted((m for m in mounts if m == real or m.startswith(real + "/")), reverse=True):
            subprocess.run(["umount", "-l", m], check=False)
        shutil.rmtree(self.path, ignore_errors=True)


@pytest.fixture(scope="session")
def deb_amd64():
    return setting("SOUNDBOX_DEB_AMD64")


@pytest.fixture(scope="session")
def deb_arm64():
    return setting("SOUNDBOX_DEB_ARM64")


@pytest.fixture(scope="module")
def installed(deb_amd64):
    """One root with the amd64 package installed by apt, as a user's
    machine goes on: the checks of what the install made, then the
    upgrade, then the purge (test_deb.py's order), each on what the one
    before left. Run alone, a later one makes the steps before it."""
    root = Root()
    try:
        root.apt_log = root.install(deb_amd64)
        yield root
    finally:
        root.remove()  # also when the install failed: no mount left behind
