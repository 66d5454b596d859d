"""Where the command finds its server, key and agent name: each an environment
variable, else a ``git config`` key, else a usage error that names both."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

from projektor_agent.errors import UsageError

URL = ("PROJEKTOR_URL", "projektor.url")
API_KEY = ("PROJEKTOR_API_KEY", "projektor.apiKey")
AGENT = ("PROJEKTOR_AGENT", "projektor.agent")
API_SUFFIX = "/api/v1"


@dataclass(frozen=True)
class Config:
    url: str  # the server's base, without /api/v1
    api_key: str
    agent: str | None  # None with an agent key, which names its agent

    @property
    def api(self) -> str:
        return self.url + API_SUFFIX


def git_config(name: str, cwd: str | None = None) -> str | None:
    """One git config value, or None (no git, not set, not in a repository)."""
    try:
        result = subprocess.run(
            ["git", "config", "--get", name],
            cwd=cwd,
            capture_output=True,
            check=False,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode != 0:
        return None
    return result.stdout.decode("utf-8", "replace").strip() or None


def setting(pair: tuple[str, str], cwd: str | None = None) -> str | None:
    env_name, git_name = pair
    value = os.environ.get(env_name, "").strip()
    return value or git_config(git_name, cwd)


def missing(pair: tuple[str, str]) -> str:
    env_name, git_name = pair
    return f"{env_name} (or git config {git_name})"


def server_url(raw: str) -> str:
    if not raw.lower().startswith(("http://", "https://")):
        raise UsageError(
            f"{URL[0]} is {raw!r}: give the server's http:// or https:// URL "
            f"(or set git config {URL[1]})"
        )
    base = raw.rstrip("/")
    if base.endswith(API_SUFFIX):  # the API's base was given, not the server's
        base = base[: -len(API_SUFFIX)]
    return base


def load(cwd: str | None = None) -> Config:
    """The configuration, or a usage error naming every missing setting."""
    url, key = setting(URL, cwd), setting(API_KEY, cwd)
    absent = [missing(pair) for pair, value in ((URL, url), (API_KEY, key)) if not value]
    if absent:
        raise UsageError("not configured: set " + " and ".join(absent))
    assert url is not None and key is not None
    return Config(url=server_url(url), api_key=api_key(key), agent=setting(AGENT, cwd))


def api_key(raw: str) -> str:
    if not (raw.isascii() and raw.isprintable() and " " not in raw):
        raise UsageError(
            f"{API_KEY[0]} is not an API key: it holds spaces or unprintable characters"
        )
    return raw


def agent_required() -> UsageError:
    return UsageError(
        f"no agent name: set {missing(AGENT)}, or use an agent key (which names its agent)"
    )
