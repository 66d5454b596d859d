"""The live demo: real runners with the scripted agent on a demo repository, and a
reviewer, working the demo workspace, so every page moves while you watch
(``manage.py demo_fleet``; ``make run`` starts it beside the server)."""

from demo.fleet.client import Tally, wait_for_server
from demo.fleet.context import FleetConfig, Record
from demo.fleet.fleet import Fleet

__all__ = ["Fleet", "FleetConfig", "Record", "Tally", "wait_for_server"]
