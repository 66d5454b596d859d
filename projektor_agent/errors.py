"""The command's exit statuses and the errors that end a command with one of them."""

from __future__ import annotations

OK = 0
REFUSED = 1  # the server said no (409/403/422), or the agent failed or lost its work
USAGE = 2  # a usage or configuration error: something to fix on this machine
UNREACHABLE = 3  # the server could not be reached, or answered 5xx/429 after retries


class CommandError(Exception):
    """Ends the command: ``message`` on stderr (or as JSON), ``status`` as exit status."""

    status = USAGE

    def __init__(self, message: str, *, body: object = None, http_status: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.body = body  # the server's answer, for --json
        self.http_status = http_status

    @property
    def code(self) -> str:
        """The server's error code (``lease_held``...), when the server answered."""
        return str(self.body.get("code") or "") if isinstance(self.body, dict) else ""


class UsageError(CommandError):
    status = USAGE


class Refused(CommandError):
    status = REFUSED


class Unreachable(CommandError):
    status = UNREACHABLE
