"""The agent dies with its runner: invariant 19 (A runner's child never outlives its
runner's right to work). A runner that is SIGKILLed stops heartbeating and its work
goes to another session after the TTL; its agent must not go on and commit later.

Two means, since either alone leaves a gap:

- On Linux the agent asks the kernel, before it runs a line of its own, for SIGKILL
  when its parent dies (``PR_SET_PDEATHSIG``). The kernel sends it when the *thread*
  that spawned the agent exits, so only the main thread (which lives as long as the
  runner) asks for it. It reaches the agent alone, not the processes it started.
- Everywhere, a watchdog: a small process of its own session that holds the read end
  of a pipe whose write end only the runner holds. The runner writes the agent's
  process group to it, and ``done`` when the agent has exited; end of file without
  ``done`` means the runner died, and the watchdog SIGKILLs the agent's whole process
  group (its children too). It waits in a blocking read, never polling.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

# Run as ``python -c WATCHDOG FD``: the standard library only, nothing of this package
# (it works from the served single-file command too).
WATCHDOG = r"""
import os, signal, sys
fd = int(sys.argv[1])
said = b""
while True:
    chunk = os.read(fd, 4096)  # blocks until the runner writes, or exits (EOF)
    if not chunk:
        break
    said += chunk
words = said.split()
if b"done" not in words and words and words[0].isdigit():
    group = int(words[0])
    try:
        os.killpg(group, signal.SIGKILL)
        sys.stderr.write(
            "projektor: the runner died: its agent (process group %d) was stopped\n" % group
        )
    except OSError:
        pass
"""


def die_with_runner() -> Callable[[], None] | None:
    """For ``Popen(preexec_fn=…)``: the agent gets SIGKILL when the runner dies (Linux,
    spawned from the main thread); None where that cannot be asked for."""
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None  # PDEATHSIG would fire when this thread ends, not the runner
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    runner = os.getpid()

    def in_the_child() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0)
        if os.getppid() != runner:  # the runner died before the request took hold
            os.kill(os.getpid(), signal.SIGKILL)

    return in_the_child


class Watchdog:
    """Started before the agent; ``guard(group)`` once the agent runs, ``release()``
    once it has exited (or could not be started)."""

    def __init__(self) -> None:
        read_end, self.write_end = os.pipe()  # neither is inherited by other children
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", WATCHDOG, str(read_end)],
                pass_fds=(read_end,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # a ^C at the terminal is the runner's to pass on
            )
        except OSError:
            os.close(self.write_end)
            raise
        finally:
            os.close(read_end)  # the runner holds the write end only: its death is EOF

    def guard(self, group: int) -> None:
        os.write(self.write_end, f"{group}\n".encode())

    def release(self) -> None:
        """The agent has exited: the watchdog leaves without killing anything."""
        if self.write_end < 0:
            return
        with contextlib.suppress(OSError):
            os.write(self.write_end, b"done\n")
        os.close(self.write_end)
        self.write_end = -1
        self.process.wait()
