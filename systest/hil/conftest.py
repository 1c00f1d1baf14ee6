"""The hardware-in-the-loop VM's fixtures: the booted VM (once), and per
build a soundboxd on its own gpio-sim chip and the snd-aloop card.

The builds: the checkout's (.build/debug, libgpiod v1 API), and, when
SOUNDBOX_HIL_DEVICE_BUILD and SOUNDBOX_HIL_DEVICE_ROOT are set (scripts/test
does, after image/build-deb), the device build (amd64/release, libgpiod
v2 API) run on the trixie root's loader and libraries. Each test runs
against each build: `pytest -k 'mute_switch and trixie'` runs one."""
import json
import os
import shlex

import pytest

from lab import Board, Log, until

ROOT = os.environ.get("LG_HIL_ROOT", "")
SHARE = os.environ.get("LG_HIL_SHARE", "")

# gpio-sim lines: 0 mute switch, 1 vol_up, 2 vol_down (all to ground,
# active low, pull-up bias), 3 the LED (output, active high).
MUTE, UP, DOWN, LED = 0, 1, 2, 3


def builds():
    found = [("checkout", f"{ROOT}/.build/debug", "")]
    dev, root = os.environ.get("SOUNDBOX_HIL_DEVICE_BUILD"), os.environ.get("SOUNDBOX_HIL_DEVICE_ROOT")
    if dev and root:
        runner = f"{root}/lib64/ld-linux-x86-64.so.2 --library-path {root}/usr/lib/x86_64-linux-gnu"
        found.append(("trixie", f"{dev}/amd64/release", runner))
    return found


@pytest.fixture(scope="session")
def board(strategy):
    if not (ROOT and SHARE):
        pytest.exit("LG_HIL_ROOT and LG_HIL_SHARE are unset: run scripts/vm/hil", returncode=2)
    strategy.transition("shell")
    return Board(strategy.shell)


class Box:
    """One soundboxd on the board, its GPIO lines and its sound."""

    def __init__(self, board, name, bin_dir, runner):
        self.board, self.name = board, name
        self.bin, self.runner = bin_dir, runner
        self.work = f"/run/soundbox-hil-{name}"  # tmpfs: database and socket, not on 9p
        self.log = Log(f"{SHARE}/soundboxd-{name}.log")
        self.captures = f"{SHARE}/capture-{name}"
        self.pid = None
        self.sim = None
        self.chip = None

    # -- the chip ----------------------------------------------------------
    def make_chip(self):
        cfg = f"/sys/kernel/config/gpio-sim/soundbox-{self.name}"
        lines = " ".join(f"mkdir {cfg}/bank0/line{i} && echo {n} > {cfg}/bank0/line{i}/name &&"
                         for i, n in enumerate(["sb-mute", "sb-vol-up", "sb-vol-down", "sb-led"]))
        self.board.check(f"mkdir {cfg} {cfg}/bank0 && echo 4 > {cfg}/bank0/num_lines && "
                         f"echo soundbox-sim > {cfg}/bank0/label && {lines} echo 1 > {cfg}/live")
        dev = self.board.check(f"cat {cfg}/dev_name").strip()
        self.chip = self.board.check(f"cat {cfg}/bank0/chip_name").strip()
        self.sim = f"/sys/devices/platform/{dev}/{self.chip}"
        for line in (MUTE, UP, DOWN):  # the switch off, the buttons released
            self.pull(line, "pull-up")

    def pull(self, line, how):
        self.board.check(f"echo {how} > {self.sim}/sim_gpio{line}/pull")

    def value(self, line):
        return self.board.check(f"cat {self.sim}/sim_gpio{line}/value").strip()

    def lines_held(self):
        return self.board.check(f"gpioinfo {self.chip}").count('"soundboxd-')

    # -- the daemon --------------------------------------------------------
    def start(self):
        self.board.check(f"mkdir -p {self.work} {self.captures}")
        conf = f"{SHARE}/soundbox-{self.name}.conf"
        with open(conf, "w", encoding="utf-8") as f:
            f.write("mqtt.enabled = false\naudio.output = alsa\naudio.device = plughw:Loopback,0,0\n"
                    f"audio.volume = 2\ngpio.chip = {self.chip}\ngpio.mute.line = {MUTE}\n"
                    f"gpio.vol_up.line = {UP}\ngpio.vol_down.line = {DOWN}\ngpio.led.line = {LED}\n")
        self.pid = self.board.spawn(
            f"{self.runner} {self.bin}/soundboxd --config {conf} --state-dir {self.work}/state "
            f"--socket {self.work}/control.sock --voices {ROOT}/voices", self.log.path)
        until(lambda: f"soundboxd ({self.name}) holding its 4 lines (log: {self.log.tail()})",
              lambda: self.lines_held() >= 4, 60)
        until(lambda: f"soundboxd ({self.name}) answering on its socket (log: {self.log.tail()})",
              lambda: self.board.run(self.ctl_line("status"))[0] == 0, 30)

    def stop(self):
        if self.pid:
            self.board.run(f"kill -TERM {self.pid}")
            self.board.stopped(self.pid, timeout=30)
            self.pid = None

    def ctl_line(self, args):
        return f"SOUNDBOX_SOCKET={self.work}/control.sock {self.runner} {self.bin}/soundboxctl {args}"

    def ctl(self, args, timeout=30):
        """soundboxctl ARGS on the board: its output, or the test fails."""
        return self.board.check(self.ctl_line(args), timeout=timeout)

    def say(self, amount, pid):
        self.ctl(f"say {amount} --id {shlex.quote(pid)}")

    def drained(self):
        self.ctl("wait --timeout 60", timeout=90)

    def state_of(self, payment):
        rows = json.loads(self.ctl("--json history"))["entries"]
        return next((r["state"] for r in rows if r["id"] == payment), None)

    def volume(self):
        return self.ctl("volume").split("volume:")[-1].strip()

    def unmuted(self):
        """The switch off, the setting off, the LED back on: where each test starts."""
        before = self.log.count("mute_switch on=false")
        if self.board.check(f"cat {self.sim}/sim_gpio{MUTE}/pull").strip() != "pull-up":
            self.pull(MUTE, "pull-up")
            self.log.await_more("mute_switch on=false", before, 10)
        self.ctl("config set audio.mute false")
        until("the LED on", lambda: self.value(LED) == "1", 5)

    # -- sound -------------------------------------------------------------
    def capture(self, name):
        return Capture(self, name)


class Capture:
    """arecord on the loopback's other end for the life of a `with` block,
    into the share: raw S16_LE mono, read on the host."""

    def __init__(self, box, name):
        self.box, self.path = box, f"{box.captures}/{name}.raw"

    def size(self):
        try:
            return os.path.getsize(self.path)
        except FileNotFoundError:
            return 0

    def __enter__(self):
        self.pid = self.box.board.spawn(
            f"arecord -q -D hw:Loopback,1,0 -f S16_LE -c 1 -r 22050 -t raw {self.path}",
            f"{self.box.captures}/arecord.err")
        until(f"arecord recording into {self.path}", lambda: self.size() > 0, 10, interval=0.05)
        return self

    def __exit__(self, *exc):
        # Half a second more of the card (what was still in its buffer).
        mark = self.size()
        until("half a second more captured", lambda: self.size() >= mark + 22050, 10, interval=0.05)
        self.box.board.run(f"kill -TERM {self.pid}")
        self.box.board.stopped(self.pid)
        return False


@pytest.fixture(scope="session", params=builds(), ids=lambda b: b[0])
def box(request, board):
    name, bin_dir, runner = request.param
    b = Box(board, name, bin_dir, runner)
    b.make_chip()
    b.start()
    yield b
    b.stop()
    board.run(f"gpioinfo {b.chip} > {SHARE}/gpioinfo-{name}-end.txt 2>&1")


@pytest.fixture
def unmuted_box(box):
    box.unmuted()
    return box
