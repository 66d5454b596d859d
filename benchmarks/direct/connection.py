"""The direct client's connection: where it connects, how it sends a statement, its
transactions and its session (``benchmarks.direct``)."""

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from benchmarks.workload import AgentPlan
from coordination.db import sql


@dataclass(frozen=True)
class DirectTarget:
    """Where and how a direct client connects, and the SQL fragments it needs from
    Django (built by the command, so this process never imports it)."""

    dialect: sql.Dialect  # the services' (coordination.db.rows.dialect())
    connect: dict[str, Any]  # psycopg.connect / sqlite3.connect keyword arguments
    key_hash: str  # coordination.models.hash_api_key(raw key)
    advisory_namespace: int  # sql.ADVISORY_LOCK_KEYS["file_claim_path"]
    event_namespace: int  # sql.ADVISORY_LOCK_KEYS["event_log"]
    # The services' own values, as plain data (the command reads them off Django):
    closed_statuses: frozenset[str]  # Issue.CLOSED_STATUSES
    conflicts_shown: int  # file_claims.claim.MAX_CONFLICTS_SHOWN
    page_size: int  # the API's pages (REST_FRAMEWORK["PAGE_SIZE"])
    columns: dict[str, tuple[str, ...]]  # sql.COLUMNS, derived from the models
    # locking.path_lock_key(workspace, node) for every node a claim of the paths an
    # agent may claim locks (paths.lock_nodes: the paths and the directories above).
    lock_keys: dict[str, int] = field(default_factory=dict)
    # As the services' statements run (coordination.db.rows.cursor): on
    # PostgreSQL bound by the server and prepared after this many runs; with None,
    # bound by the client and never prepared, as on Django's cursors.
    prepare_threshold: int | None = None


class Refused(Exception):
    """The API would answer 4xx: any open transaction is rolled back and the label
    (what the API would answer) is the request's outcome."""

    def __init__(self, label: str) -> None:
        super().__init__(label)
        self.label = label


class DirectConnection:
    """One connection of this process, and the plumbing the operations run on."""

    def __init__(self, plan: AgentPlan, target: DirectTarget) -> None:
        sql.set_columns(target.columns)  # no Django here to derive them from the models
        self.plan = plan
        self.target = target
        self.dialect = target.dialect
        self.postgres = target.dialect.postgres
        self.connection: Any = None
        self.sent = 0
        self.session_id = 0
        self.project_id = 0  # the claimed issue's, read by claim_paths
        self.notify_after_commit = False
        self.workspace_id = plan.workspace_id
        self.translated: dict[str, str] = {}
        self.now = self.dialect.now()

    # --- plumbing ----------------------------------------------------------------------

    def lock(self, clause: str) -> str:
        """A row-lock clause on PostgreSQL; nothing on SQLite (BEGIN IMMEDIATE)."""
        return f" {clause}" if self.postgres else ""

    def run(self, text: str, params: Sequence[Any] = ()) -> Any:
        """Execute one statement (``%s`` placeholders, ``%%`` for ``%``); return the cursor."""
        self.sent += 1
        if self.postgres:
            return self.connection.execute(text, params)
        query = self.translated.get(text)
        if query is None:
            query = self.translated[text] = text.replace("%s", "?").replace("%%", "%")
        return self.connection.execute(query, params)

    def send(self, statement: sql.Statement) -> Any:
        """Execute one of the services' own statements."""
        return self.run(*statement)

    def begin(self) -> None:
        self.run("BEGIN" if self.postgres else "BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.run("COMMIT")

    def rollback(self) -> None:
        self.run("ROLLBACK")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN ... COMMIT; any exception (a ``Refused`` too) rolls back. A transaction
        that wrote events is followed by their NOTIFY (``feed.committed``)."""
        self.begin()
        self.notify_after_commit = False
        try:
            yield
        except BaseException:
            self.rollback()
            raise
        self.commit()
        if self.notify_after_commit:
            self.send(sql.notify(workspace_ids=[self.workspace_id]))

    def statements(self) -> int:
        return self.sent

    def reconnects(self) -> int:
        return 0

    # --- session (not timed) -----------------------------------------------------------

    def open(self) -> None:
        if self.postgres:
            import psycopg

            prepared = self.target.prepare_threshold is not None
            self.connection = psycopg.connect(
                **self.target.connect,
                autocommit=True,
                prepare_threshold=self.target.prepare_threshold,
                cursor_factory=psycopg.Cursor if prepared else psycopg.ClientCursor,
            )
        else:
            self.connection = sqlite3.connect(**self.target.connect, isolation_level=None)
            # As Django's SQLite connection: foreign keys on, then the settings' PRAGMAs.
            for pragma in ("foreign_keys = ON", "journal_mode = WAL", "synchronous = NORMAL"):
                self.connection.execute(f"PRAGMA {pragma}")
        row = self.run(
            f"INSERT INTO agent_sessions (workspace_id, agent_id, status, started_at,"
            f" last_heartbeat_at) VALUES (%s, %s, 'active', {self.now}, {self.now}) RETURNING id",
            [self.workspace_id, self.plan.agent_id],
        ).fetchone()
        self.session_id = int(row[0])

    def close(self) -> None:
        try:
            self.run(
                f"UPDATE agent_sessions SET status = 'ended', ended_at = {self.now} WHERE id = %s",
                [self.session_id],
            )
        finally:
            self.connection.close()

    # --- answers ---------------------------------------------------------------------

    def answer(self, operation: Callable[[], str]) -> str:
        """One request's work; a refusal becomes its label, like an HTTP status."""
        try:
            return operation()
        except Refused as refusal:
            return refusal.label
