"""The benches, a development package: in a checkout (a Django app, installed when it
is importable, so ``manage.py bench``, ``bench_claims``, ``bench_heatmap`` and
``bench_webhooks`` are there), not in the wheel; the product never imports it.

``manage.py bench``: a fleet of agent processes against the app under gunicorn, with
the database's own ceiling (the same transactions issued directly) beside it.

Modules, by the process they run in:

- client processes (standard library only, plus the database driver for direct):
  ``workload`` (what an agent does in each scenario, timed and tallied), ``agent``
  (the agent over HTTP), ``direct`` (the same operations as plain SQL);
- the command's process (Django): ``server`` (gunicorn), ``fleet`` (spawns the
  client processes), ``load`` (the bench workspace and its bulk data),
  ``statements`` (statements per request), ``report`` (table and JSON) and
  ``suite`` (the order of it all).

This package's ``__init__`` imports nothing: the client processes import their
modules through it and must not pull in Django.
"""
