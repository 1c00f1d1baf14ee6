"""Every labgrid environment file of systest/ loads, its target builds
with the drivers it names bound (the lab's real-board file too, which
cannot run here: a typo in it would otherwise wait for a lab to show)."""
import glob
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = sorted(glob.glob(f"{HERE}/*/*.yaml"))


@pytest.mark.parametrize("path", FILES, ids=[os.path.relpath(p, HERE) for p in FILES])
def test_environment_loads(path, monkeypatch, tmp_path):
    # The templates' values (systest/image/run and scripts/vm/hil set them).
    for name in ("LG_IMAGE_CARD", "LG_IMAGE_VARS", "LG_IMAGE_KIT", "LG_IMAGE_CONSOLE", "LG_IMAGE_KERNEL",
                 "LG_IMAGE_INITRD", "LG_IMAGE_DTB", "LG_IMAGE_HARNESS_UNIT", "LG_IMAGE_CONSOLE_UNIT", "LG_IMAGE_WANTS",
                 "LG_HIL_KERNEL", "LG_HIL_INITRD", "LG_HIL_SHARE", "LG_HIL_ROOT"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    # One process per file: each imports boardstrategy.py, which registers its driver once.
    check = ("import sys; from labgrid import Environment; "
             "s = Environment(sys.argv[1]).get_target('main').get_driver('BoardStrategy', activate=False); "
             "assert s.power and s.console and s.shell")
    p = subprocess.run([sys.executable, "-c", check, path], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-800:]


def test_every_environment_is_here():
    names = {os.path.relpath(p, HERE) for p in FILES}
    assert {"hil/qemu.yaml", "image/pc.yaml", "image/rpi.yaml", "image/rpi-lab.yaml"} <= names, names
