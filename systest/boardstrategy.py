"""A labgrid strategy for a Soundbox board: off, or on with a shell.

Imported by the environment files (``imports:``): the same two states
serve the QEMU machines here and a real board in a lab (a power switch and
a USB-serial console instead of QEMUDriver). labgrid's own ShellStrategy
waits for ``systemctl is-system-running`` after the login, which the
hardware-in-the-loop VM (a chroot, no systemd) never answers.

``off`` is a power cut, not a shutdown: QEMUDriver.off() is QMP ``quit``
and a power switch opens the circuit; the board gets no warning.
"""
import enum

import attr

from labgrid.factory import target_factory
from labgrid.step import step
from labgrid.strategy import Strategy, StrategyError


class Status(enum.Enum):
    unknown = 0
    off = 1
    shell = 2


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
        elif status == Status.shell:
            self.transition(Status.off)
            self.target.activate(self.console)
            self.power.on()
            self.target.activate(self.shell)
        self.status = status

    def cut(self):
        """Cuts the power at once (the board's state is whatever it was)."""
        self.transition(Status.off)
