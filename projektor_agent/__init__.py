"""``projektor``: the command for agents' machines.

It keeps Projektor's protocol for an agent that does not know it: one REST call per
subcommand, ``projektor run`` (take an issue, keep its session alive while the agent
works, stop the agent when the work is taken, hand it in or give it back), the agent
CLIs' hooks that claim a file before it is edited (Claude Code, Codex, Gemini CLI, Cursor,
Copilot CLI), and the pre-commit guard.

Standard library only, Python 3.9 or later: it runs on any machine an agent runs on,
as a console script or as the one file the server serves at ``/agent/projektor``.
"""

__version__ = "1"
