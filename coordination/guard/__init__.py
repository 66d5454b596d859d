"""The downloads of the agent's side: the ``projektor`` command as one executable file
(``/agent/projektor``), which is also its pre-commit guard as a hook on its own
(``/guard/pre-commit``: the same file, run by git as ``pre-commit``). The code itself
lives in the ``projektor_agent`` package."""
