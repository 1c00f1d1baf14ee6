"""What the system tests share: a board reached through labgrid's shell,
waiting for a condition, and sound captured as raw S16_LE samples."""
import array
import math
import os
import shlex
import sys
import time


def until(what, condition, timeout, interval=0.2):
    """Polls condition() until it is true; fails the test with WHAT (or
    what() when it is a function: read at the end, e.g. a log's tail)
    after TIMEOUT seconds. Returns the condition's value."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what() if callable(what) else what}: not within {timeout} s")
        time.sleep(interval)


class Board:
    """The board's shell (labgrid's ShellDriver: one command at a time over
    the console, its output and exit status back)."""

    def __init__(self, shell):
        self.shell = shell

    def run(self, cmd, timeout=30):
        out, _, rc = self.shell.run(cmd, timeout=timeout)
        return rc, "\n".join(out)

    def check(self, cmd, timeout=30):
        """Runs CMD; its output, or the test fails with its exit status and output."""
        rc, out = self.run(cmd, timeout=timeout)
        if rc != 0:
            raise AssertionError(f"on the board, {cmd!r} exited {rc}: {out[-800:]}")
        return out

    def spawn(self, cmd, log):
        """Starts CMD in the background, its output to LOG; its pid."""
        return int(self.check(f"{cmd} >{shlex.quote(log)} 2>&1 </dev/null & echo $!"))

    def stopped(self, pid, timeout=10):
        until(f"process {pid} ended", lambda: self.run(f"kill -0 {pid} 2>/dev/null")[0] != 0, timeout)


class Log:
    """A log file the board writes into the share, read on the host."""

    def __init__(self, path):
        self.path = path

    def text(self):
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def count(self, needle):
        return self.text().count(needle)

    def lines(self, needle):
        return [line for line in self.text().splitlines() if needle in line]

    def tail(self, n=5):
        return " | ".join(self.text().splitlines()[-n:])

    def await_more(self, needle, than, timeout):
        """Waits until NEEDLE occurs more than THAN times (a count taken
        before the action that should log it)."""
        until(lambda: f"a new {needle!r} in {self.path} (last: {self.tail(3)})",
              lambda: self.count(needle) > than, timeout)


RATE = 22050  # soundboxd plays S16_LE mono at 22050 Hz


def samples(path):
    data = array.array("h")
    with open(path, "rb") as f:
        data.frombytes(f.read())
    if sys.byteorder != "little":
        data.byteswap()
    return data


def peak(path):
    """The largest sample's magnitude, 0..1."""
    return max((abs(s) for s in samples(path)), default=0) / 32768


def rms(path, floor=16):
    """RMS (0..1) of the sound between its first and last sample above
    FLOOR (0.05 % of full scale): 0 when all silent. snd-aloop's silence
    is exactly 0."""
    s = samples(path)
    loud = [i for i, v in enumerate(s) if abs(v) > floor]
    if not loud:
        return 0.0
    part = s[loud[0]:loud[-1] + 1]
    return math.sqrt(sum(v * v for v in part) / len(part)) / 32768


def seconds(path):
    return os.path.getsize(path) / 2 / RATE
