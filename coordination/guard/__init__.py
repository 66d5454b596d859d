"""The downloads of the agent's side: the ``projektor`` command as one executable file
(``/agent/projektor``) and its pre-commit guard as a standalone hook
(``/guard/pre-commit``). The code itself lives in the ``projektor_agent`` package."""
