"""The bench operations as the SQL the API runs for them (``benchmarks.direct``)."""

from dataclasses import dataclass
from typing import Any

from benchmarks.direct.connection import DirectConnection, DirectTarget, Refused
from benchmarks.workload import AgentPlan, run_agent
from coordination.db import sql
from coordination.paths import lock_nodes, meeting_point, overlapping_pairs


@dataclass(frozen=True)
class Offsets:
    """Where the services' statements put what the bench reads of their rows (from
    ``sql.COLUMNS``, which this process fills from its ``DirectTarget``)."""

    wip_limit: int  # sql.lock_issue_project
    status: int  # sql.share_claimed_issue: the issue,
    assignee: int
    project: int  # (sql.claim_context)
    session: int  # then the session
    fence: int  # a lease's columns,
    released_project: int  # then (sql.release_leases) its project
    # sql.overlapping_holders and sql.insert_claims: a claim's columns (the agent's and
    # the session's liveness after them).
    holder_issue: int
    holder_session: int
    holder_agent: int
    holder_path: int
    holder_agent_name: int

    @classmethod
    def of(cls, columns: dict[str, tuple[str, ...]]) -> "Offsets":
        project, issue, lease = columns[sql.PROJECT], columns[sql.ISSUE], columns[sql.LEASE]
        claim, agent = columns[sql.CLAIM], columns[sql.AGENT]
        return cls(
            wip_limit=project.index("agent_wip_limit"),
            status=issue.index("status"),
            assignee=issue.index("assignee_id"),
            project=issue.index("project_id"),
            session=len(issue),
            fence=lease.index("fence"),
            released_project=len(lease),
            holder_issue=claim.index("issue_id"),
            holder_session=claim.index("session_id"),
            holder_agent=claim.index("agent_id"),
            holder_path=claim.index("path"),
            holder_agent_name=len(claim) + agent.index("name"),
        )


class DirectDriver(DirectConnection):
    """The bench operations as SQL on one connection of this process."""

    kept_key: tuple[int, int] | None = None  # (key id, key ring version), as keys keeps it

    def __init__(self, plan: AgentPlan, target: DirectTarget) -> None:
        super().__init__(plan, target)
        self.at = Offsets.of(target.columns)

    def active_key(self) -> None:
        """keys.active_key: every request starts with it. A key read before: its row
        by primary key with the key ring version; else, or if the version moved, the
        lookup by the digest, which reads the version too."""
        digest = self.target.key_hash
        if self.kept_key is not None:
            key_id, version = self.kept_key
            row = self.send(
                sql.key_ring_version(self.dialect, key_id=key_id, key_hash=digest)
            ).fetchone()
            if row is None:
                raise Refused("401")
            if int(row[0]) == version:
                return
        row = self.send(sql.active_key(self.dialect, digest)).fetchone()
        if row is None:
            raise Refused("401")
        self.kept_key = (int(row[0]), int(row[-1]))

    # --- heartbeat ---------------------------------------------------------------------

    def heartbeat(self) -> str:
        return self.answer(self.heartbeat_session)

    def heartbeat_session(self) -> str:
        """agents.heartbeat_session: on PostgreSQL one UPDATE that returns the session
        as the API shows it; on SQLite the UPDATE, then that read."""
        self.active_key()
        beat = sql.heartbeat(
            self.dialect, workspace_id=self.workspace_id, session_id=self.session_id
        )
        if self.postgres:
            row = self.send(beat).fetchone()
        else:
            row = None
            if self.send(beat).rowcount:
                row = self.send(
                    sql.shown_session(self.dialect, session_id=self.session_id)
                ).fetchone()
        if row is None:
            raise Refused("409 session_ended")
        return "200"

    # --- leases --------------------------------------------------------------------------

    def claim_issue(self) -> str:
        return self.answer(self.claim_lease)

    def claim_lease(self) -> str:
        """leases.claim_issue: everything in its transaction."""
        self.active_key()
        with self.transaction():
            self.admit_lease()
        return "201"

    def admit_lease(self) -> None:
        """The transaction of leases.claim_issue, as it goes when the insert admits."""
        issue_id = self.plan.issue_id
        project = self.send(  # locking.lock_project
            sql.lock_issue_project(self.dialect, workspace_id=self.workspace_id, issue_id=issue_id)
        ).fetchone()
        if project is None:
            raise Refused("404")
        project_id, limit = int(project[0]), int(project[self.at.wip_limit])
        claimer = self.send(  # leases.share_claimed_issue
            sql.share_claimed_issue(
                self.dialect,
                workspace_id=self.workspace_id,
                issue_id=issue_id,
                session_id=self.session_id,
            )
        ).fetchone()
        if claimer[self.at.session] is None:
            raise Refused("400")
        if claimer[self.at.status] in self.target.closed_statuses:
            raise Refused("409 invalid_transition")
        lease = self.send(  # leases.insert_lease_within_cap
            sql.insert_lease_within_cap(
                self.dialect,
                workspace_id=self.workspace_id,
                issue_id=issue_id,
                session_id=self.session_id,
                agent_id=self.plan.agent_id,
                project_id=project_id,
                limit=limit,
            )
        ).fetchone()
        if lease is None:
            raise Refused("409 lease_held")  # the bench's agents never share an issue
        if claimer[self.at.assignee] is None:  # leases.assign_if_unassigned
            self.send(
                sql.assign_unassigned_issue(
                    self.dialect, issue_id=issue_id, agent_id=self.plan.agent_id
                )
            )
        self.write_event(
            "lease.granted",
            project_id=project_id,
            data={"lease": lease[0], "fence": lease[self.at.fence]},
        )

    def write_event(self, type: str, *, project_id: int | None, data: dict[str, Any]) -> None:
        """events.write: the transaction's events, its last statement (on PostgreSQL it
        takes the writer lock too); the NOTIFY follows the commit (``transaction``)."""
        self.notify_after_commit = self.postgres
        self.send(
            sql.insert_events(
                self.dialect,
                workspace_id=self.workspace_id,
                lock=self.target.event_namespace,
                rows=[
                    sql.EventRow(
                        type=type,
                        project_id=project_id,
                        issue_id=self.plan.issue_id,
                        session_id=self.session_id,
                        agent_id=self.plan.agent_id,
                        data=data,
                    )
                ],
            )
        )

    def release_issue(self) -> str:
        return self.answer(self.release_lease)

    def release_lease(self) -> str:
        """leases.release_issue, without a fence: one compare-and-set and its event."""
        self.active_key()
        with self.transaction():
            released = self.send(  # leases.release_leases
                sql.release_leases(
                    self.dialect,
                    reason="released",
                    workspace_id=self.workspace_id,
                    issue_id=self.plan.issue_id,
                    session_id=self.session_id,
                )
            ).fetchall()
            if not released:
                raise Refused("409 lease_not_held")
            row = released[0]
            lease_id, fence, project_id = row[0], row[self.at.fence], row[self.at.released_project]
            self.write_event(
                "lease.released",
                project_id=project_id,
                data={"lease": lease_id, "fence": fence, "reason": "released"},
            )
        return "200"

    # --- file claims ---------------------------------------------------------------------

    def claim_files(self, paths: list[str]) -> str:
        return self.answer(lambda: self.claim_paths(paths))

    def claim_paths(self, paths: list[str]) -> str:
        """file_claims.claim_files: one attempt."""
        self.active_key()
        with self.transaction():
            return self.attempt_claim(paths)

    def attempt_claim(self, paths: list[str]) -> str:
        """The transaction of file_claims._attempt (no force, no fence)."""
        issue_id = self.plan.issue_id
        row = self.send(  # file_claims.ClaimContext: the issue, the session if live
            sql.claim_context(
                self.dialect,
                workspace_id=self.workspace_id,
                issue_id=issue_id,
                session_id=self.session_id,
            )
        ).fetchone()
        if row is None:
            raise Refused("404")
        self.project_id = int(row[self.at.project])
        if row[self.at.session] is None:
            raise Refused("400")
        if not row[-1]:
            raise Refused("409 session_not_live")
        status = self.lock_paths_and_issues(paths, sql.overlap_of(paths))
        if status in self.target.closed_statuses:
            raise Refused("409 invalid_transition")
        overlap = sql.overlap_of(paths)
        holders = self.send(  # file_claims.overlapping_claims(lock=True)
            sql.overlapping_holders(self.dialect, workspace_id=self.workspace_id, overlap=overlap)
        ).fetchall()
        issue_at, session_at, path_at = (
            self.at.holder_issue,
            self.at.holder_session,
            self.at.holder_path,
        )
        holding = [row for row in holders if row[session_at] is None or row[-1]]  # live last
        contested = [row for row in holding if row[issue_at] != issue_id]
        kept = {row[path_at] for row in holding if row[issue_at] == issue_id}
        kept &= set(paths)
        if contested:
            by_path = {row[path_at]: row for row in contested}
            pairs = [(path, by_path[held]) for path, held in overlapping_pairs(paths, by_path)]
            self.log_conflicts(pairs)
            conflicts = [
                {
                    "path": path,
                    "held_path": row[path_at],
                    "issue": row[issue_at],
                    "session": row[session_at],
                    "agent": row[self.at.holder_agent_name],  # file_claims.check.Holder
                }
                for path, row in pairs
            ]
            self.write_event(  # file_claims.announce_refusal
                "claims.refused",
                project_id=self.project_id,
                data={
                    "paths": paths,
                    "conflicts": conflicts[: self.target.conflicts_shown],
                    "conflicts_total": len(conflicts),
                },
            )
            return "conflict"  # committed: the conflict log stays, nothing else changed
        fresh = [path for path in paths if path not in kept]
        inserted = self.send(  # file_claims.insert_claims
            sql.insert_claims(
                self.dialect,
                workspace_id=self.workspace_id,
                issue_id=issue_id,
                session_id=self.session_id,
                agent_id=self.plan.agent_id,
                paths=fresh,
            )
        ).fetchall()
        if len(inserted) != len(fresh):
            raise Refused("409 raced")  # the API would retry; the bench never gets here
        if inserted:
            self.write_event(
                "claims.granted",
                project_id=self.project_id,
                data={"paths": sorted(row[self.at.holder_path] for row in inserted)},
            )
        return "201"

    def lock_paths_and_issues(self, paths: list[str], overlap: sql.Overlap) -> str:
        """locking.lock_paths_and_issues: (PostgreSQL) the advisory locks in key order,
        exclusive per path and shared per directory above one, then the claiming and
        holding issues ``FOR SHARE``; the claiming issue's status, read under that
        lock."""
        issue_id = self.plan.issue_id
        if not self.postgres:
            rows = self.send(sql.claim_issue_status(issue_id=issue_id)).fetchall()
            return str(dict(rows)[issue_id])
        keys, exclusive = sql.ordered_locks(
            (self.target.lock_keys[node], mode) for node, mode in lock_nodes(paths).items()
        )
        self.send(
            sql.path_locks(namespace=self.target.advisory_namespace, keys=keys, exclusive=exclusive)
        ).fetchall()
        rows = self.send(
            sql.share_claim_issues(
                self.dialect, workspace_id=self.workspace_id, issue_id=issue_id, overlap=overlap
            )
        ).fetchall()
        return str(dict(rows)[issue_id])

    def log_conflicts(self, pairs: list[tuple[str, Any]]) -> None:
        """file_claims.log_conflicts: one append-only row per (requested path,
        overlapping holder), at the deeper path, in one INSERT."""
        rows = [
            sql.ConflictRow(
                path=meeting_point(path, row[self.at.holder_path]),
                rejected_issue_id=self.plan.issue_id,
                rejected_session_id=self.session_id,
                rejected_agent_id=self.plan.agent_id,
                holding_issue_id=row[self.at.holder_issue],
                holding_session_id=row[self.at.holder_session],
                holding_agent_id=row[self.at.holder_agent],
            )
            for path, row in pairs
        ]
        self.send(
            sql.insert_conflicts(
                self.dialect, workspace_id=self.workspace_id, rows=rows, forced=False
            )
        )

    def release_files(self) -> str:
        return self.answer(self.release_paths)

    def release_paths(self) -> str:
        """file_claims.release_files with a session and no paths: the release and its
        event (on PostgreSQL in one statement, with no transaction around it)."""
        self.active_key()
        if self.postgres:
            released = self.send(
                sql.release_claims_announced(
                    self.dialect,
                    reason="released",
                    workspace_id=self.workspace_id,
                    issue_id=self.plan.issue_id,
                    session_id=self.session_id,
                    paths=None,
                    event_type="claims.released",
                    lock=self.target.event_namespace,
                )
            ).fetchall()
            if not released:
                raise Refused("409 nothing_released")
            self.send(sql.notify(workspace_ids=[self.workspace_id]))
            return "200"
        with self.transaction():
            released = self.send(
                sql.release_claims(
                    self.dialect,
                    reason="released",
                    workspace_id=self.workspace_id,
                    issue_id=self.plan.issue_id,
                    session_id=self.session_id,
                )
            ).fetchall()
            if not released:
                raise Refused("409 nothing_released")  # the bench releases what it claimed
            self.write_event(
                "claims.released",
                project_id=released[0][4],
                data={"paths": sorted(row[0] for row in released), "reason": "released"},
            )
        return "200"

    # --- lists ---------------------------------------------------------------------------

    def list_live_sessions(self) -> str:
        return self.answer(self.live_sessions)

    def live_sessions(self) -> str:
        """GET /sessions/?live=true: selectors.sessions.session_list, paginated: the count,
        then the first page (sql.session_count, sql.session_page)."""
        self.active_key()
        live = sql.SessionList(workspace_id=self.workspace_id, live=True)
        (count,) = self.send(sql.session_count(self.dialect, live)).fetchone()
        if count:
            page = sql.session_page(self.dialect, live, limit=self.first_page(count), offset=0)
            self.send(page).fetchall()
        return "200"

    def list_ready_issues(self) -> str:
        return self.answer(self.ready_issues)

    def ready_issues(self) -> str:
        """GET /issues/ready/: selectors.issues.ready_issues, paginated: the count, then the
        first page (sql.queue_count, sql.queue_page), read off issue_ready_queue_idx."""
        self.active_key()
        queue = sql.Queue(workspace_id=self.workspace_id)
        (count,) = self.send(sql.queue_count(self.dialect, queue)).fetchone()
        if count:
            page = sql.queue_page(self.dialect, queue, limit=self.first_page(count), offset=0)
            self.send(page).fetchall()
        return "200"

    def first_page(self, count: int) -> int:
        """How many rows Django's paginator asks for on the first page: a full page,
        or all of them when there are fewer."""
        return min(self.target.page_size, count)


def main(plan: AgentPlan, target: DirectTarget, barrier: Any, results: Any) -> None:
    """Entry point of a spawned direct client process."""
    run_agent(DirectDriver(plan, target), plan, barrier, results)
