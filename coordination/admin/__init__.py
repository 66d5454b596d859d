"""The operators' console: who is live, what is held, the logs, and actions that go
through the services (so no invariant can be broken from here)."""

from coordination.admin import (  # noqa: F401  (register)
    fleet,
    issues,
    landings,
    logs,
    resources,
    sessions,
    tracker,
    webhooks,
)
