"""The agent CLI's hooks, run around an edit as that CLI runs them.

Before an edit, each hook the CLI's own file in the checkout names (``speech.commands``:
what ``projektor run --hooks NAME`` installs) runs with that CLI's payload on stdin
(``speech.stdin``), and a refusal is read that CLI's way (``speech.refusal``); a file
refused may be tried again, with backoff. After an edit, the ``speech.POST`` hooks run
(Claude Code's ``PostToolUse``: progress). Standard library only, as the agent.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

try:
    from demo.workbench import speech
except ImportError:  # beside agent.py run as a script: its folder is on the path
    import speech  # type: ignore[no-redef]

BLOCK = 2  # a hook's "no", for the CLIs that read the exit status
RETRIES = 3  # a refused declared file: tried again this many times
BACKOFF_SECONDS = 1.0  # then 2, 4 …
HOOK_TIMEOUT_SECONDS = 60


class Hooks:
    """The hooks of the agent CLI ``harness`` in the checkout ``root``, for one attempt
    at an issue (``session``: the CLI's session id in their payloads)."""

    def __init__(self, root: Path, harness: str, session: str, say: Callable[[str], None]):
        self.root, self.harness, self.session, self.say = root, harness, session, say

    def announce(self, path: str, *, retries: int = 0) -> bool:
        """The hooks before an edit of ``path``: False when one said no, ``retries``
        times more with backoff between them."""
        for attempt in range(retries + 1):
            if self.run(speech.PRE, path):
                return True
            if attempt < retries:
                time.sleep(BACKOFF_SECONDS * 2**attempt)
        return False

    def run(self, event: str, path: str) -> bool:
        """The hooks of ``event`` for ``path``: False when one refused it before its edit."""
        stdin = speech.stdin(self.harness, event, self.root, path, self.session)
        for command in speech.commands(self.root, self.harness, event):
            try:
                done = subprocess.run(
                    command,
                    shell=True,
                    cwd=self.root,
                    input=stdin,
                    capture_output=True,
                    text=True,
                    timeout=HOOK_TIMEOUT_SECONDS,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                self.say(f"the {event} hook timed out for {path}; going on")
                continue
            reason = speech.refusal(self.harness, done)
            if reason is not None and event == speech.PRE:
                self.say(f"the hook refused {path}: {reason}")
                return False
            if done.returncode not in (0, BLOCK):
                self.say(f"the {event} hook failed ({done.returncode}): {done.stderr.strip()}")
        return True
