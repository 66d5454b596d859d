"""The demo: a workspace with a month of a fleet's history (``seeding``, ``manage.py
seed_demo``) and a live fleet of agents working it over HTTP (``fleet``, ``manage.py
demo_fleet``); ``make run`` runs both. A development aid shipped beside the product,
which never imports it.

This ``__init__`` imports nothing: Django imports it before the models are ready.
"""
