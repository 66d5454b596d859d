"""The workbench: a generated git repository and a scripted coding agent to work it.

- ``repository.create(path, seed, issues=M) -> Plan``: a repository of a few hundred
  small files (plus the hot files most changes touch, and its check, ``check.py``) with
  one commit on ``main``, and the plan of M issues the fleet works on it, semantic
  pairs among them (``Plan.save(file)`` writes what the agent reads);
  ``checks.red_commits(path, base)``: the commits on ``main`` whose tree fails the
  check.
- ``agent.py``: the scripted agent that works one issue of the plan in its checkout,
  run by ``projektor run`` (its command line is in its docstring).

Standard library only, and nothing of the server: the agent runs as a runner's child
process on any machine with Python and git.
"""
