"""A labgrid strategy for a Soundbox board: off, on, or on with a shell.

Imported by the environment files (``imports:``): the same states
serve the QEMU machines here and a real board in a lab (a power switch and
a USB-serial console instead of QEMUDriver). labgrid's own ShellStrategy
waits for ``systemctl is-system-running`` after the login, which the
hardware-in-the-loop VM (a chroot, no systemd) never answers.

``off`` is a power cut, not a shutdown: QEMUDriver.off() is QMP ``quit``
and a power switch opens the circuit; the board gets no warning.
"""
import enum
import time

import attr

from labgrid.factory import target_factory
from labgrid.step import step
from labgrid.strategy import Strategy, StrategyError


class Status(enum.Enum):
    unknown = 0
    off = 1
    on = 2  # powered, its console read, nobody logged in (a soak cuts boots before their login)
    shell = 3


@target_factory.reg_driver
@attr.s(eq=False)
class BoardStrategy(Strategy):
    bindings = {
        "power": "PowerProtocol",
        "console": "ConsoleProtocol",
        "shell": "ShellDriver",
    }

    status = attr.ib(default=Status.unknown)

    @step(args=["status"])
    def transition(self, status):
        if not isinstance(status, Status):
            status = Status[status]
        if status == Status.unknown:
            raise StrategyError(f"can not transition to {status}")
        if status == self.status:
            return
        if status == Status.off:
            self.target.deactivate(self.shell)
            self.target.activate(self.power)
            self.power.off()
        elif status == Status.on:
            self.transition(Status.off)
            self.target.activate(self.console)
            self.power.on()
        elif status == Status.shell:
            if self.status != Status.on:
                self.transition(Status.on)
            self.target.activate(self.shell)
        self.status = status

    def cut(self):
        """Cuts the power at once (the board's state is whatever it was)."""
        self.transition(Status.off)

    def running(self):
        """The machine is on (its QEMU has not ended)."""
        child = getattr(self.power, "_child", None)
        return child is not None and child.poll() is None

    def await_off(self, timeout):
        """Waits until the board has turned itself off (a poweroff, or a
        reboot: QEMU runs with -no-reboot, so that the test sees each boot
        apart). True when it did within TIMEOUT seconds. (QEMUDriver has
        no call for a machine that ended by itself: its process is read.)"""
        child = getattr(self.power, "_child", None)
        if child is None:
            raise StrategyError("await_off needs a QEMUDriver that is on")
        deadline = time.monotonic() + timeout
        while child.poll() is None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.5)
        self.target.deactivate(self.shell)
        child.communicate()
        self.power._child, self.power.status = None, 0
        self.status = Status.off
        return True
