"""Coordination state: leases, file claims, worktree locks and runs (sessions have a
module of their own).

No back doors: these rows are written only by the services, which enforce the WIP
cap, liveness and the all-or-nothing rule. The admin shows them read-only and
changes them only through actions that call ``coordination.services.operators``.
Each list is a few compact columns, so it fits a laptop's window: one holder cell
(agent · session, and the session's live / stale / ended state), short times, long
paths and titles clipped with the whole on hover.
"""

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from coordination import models as m
from coordination.admin import display
from coordination.admin.filters import ClaimKindFilter, HolderStateFilter, RunLiveFilter
from coordination.admin.reporting import operator_name, report
from coordination.admin.state import StateAdmin
from coordination.services import operators


class HeldAdmin(StateAdmin):
    """Leases, claims and locks: live while unreleased and their holder is live."""

    list_filter = [HolderStateFilter, "release_reason", "workspace"]
    related: tuple[str, ...] = ()

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        # The change page's row too (get_object reads this queryset): every
        # relation its fields show, in the one query.
        return (
            super()
            .get_queryset(request)
            .select_related("workspace", "session__agent", *self.related)
            .annotate(holder_state=display.session_state("session__"))
        )

    @admin.display(description="holder", ordering="session__agent__name")
    def holder(self, obj: Any) -> SafeString:
        return display.holder(obj)

    @admin.display(description="released", ordering="released_at")
    def released(self, obj: Any) -> SafeString | str:
        return display.released(obj)

    issue_width = 28  # characters of ``#12 Title``

    @admin.display(description="issue", ordering="issue_id")
    def issue_cell(self, obj: Any) -> SafeString | str:
        return display.issue_label(obj.issue, self.issue_width)


@admin.register(m.IssueLease)
class IssueLeaseAdmin(HeldAdmin):
    list_display = ["issue_cell", "project", "holder", "acquired", "released"]
    list_filter = [HolderStateFilter, "release_reason", "issue__project", "workspace"]
    related = ("issue__project", "agent")
    search_fields = ["issue__title", "=issue__id", "agent__name"]
    date_hierarchy = "acquired_at"
    actions = ["force_release"]

    project = display.clipped("issue.project.key", 12, description="project")
    acquired = display.dated("acquired_at", "acquired")

    @admin.action(description="Force-release selected leases (overridden; the issue is told)")
    def force_release(self, request: HttpRequest, queryset: QuerySet[m.IssueLease]) -> None:
        outcome = operators.force_release_leases(leases=queryset, operator=operator_name(request))
        report(self, request, "Force-released", outcome)


@admin.register(m.FileClaim)
class FileClaimAdmin(HeldAdmin):
    list_display = ["path_cell", "issue_cell", "holder", "claimed", "released"]
    list_filter = [
        HolderStateFilter,
        ClaimKindFilter,
        "release_reason",
        "issue__project",
        "workspace",
    ]
    related = ("issue", "agent")
    issue_width = 0  # the path needs the room: the number, its title on hover
    search_fields = ["path", "issue__title", "=issue__id", "agent__name"]
    date_hierarchy = "claimed_at"
    actions = ["force_release"]

    claimed = display.dated("claimed_at", "claimed")

    @admin.display(description="path", ordering="path")
    def path_cell(self, obj: m.FileClaim) -> SafeString:
        """A directory claim is marked ``dir``: it holds its whole subtree."""
        return display.claim_path(obj.path, 32)

    @admin.action(description="Force-release selected file claims (overridden; the issue is told)")
    def force_release(self, request: HttpRequest, queryset: QuerySet[m.FileClaim]) -> None:
        outcome = operators.force_release_file_claims(
            claims=queryset, operator=operator_name(request)
        )
        report(self, request, "Force-released", outcome)


@admin.register(m.WorktreeLock)
class WorktreeLockAdmin(HeldAdmin):
    list_display = ["worktree_cell", "run_cell", "holder", "acquired", "released"]
    related = ("worktree", "run")
    search_fields = ["worktree__slug", "=run__id"]
    worktree_cell = display.clipped("worktree.slug", 20, description="worktree")
    date_hierarchy = "acquired_at"
    actions = ["force_release"]

    acquired = display.dated("acquired_at", "acquired")

    @admin.display(description="run", ordering="run_id")
    def run_cell(self, obj: m.WorktreeLock) -> SafeString | str:
        """The run it was taken for, its issue on hover."""
        if obj.run is None:
            return display.NONE
        return format_html(
            '<span class="nowrap" title="issue {}">run {}</span>', obj.run.issue_id, obj.run_id
        )

    @admin.action(description="Force-release selected worktree locks (their runs are cancelled)")
    def force_release(self, request: HttpRequest, queryset: QuerySet[m.WorktreeLock]) -> None:
        outcome = operators.force_release_worktree_locks(
            locks=queryset, operator=operator_name(request)
        )
        report(self, request, "Force-released", outcome)


@admin.register(m.Run)
class RunAdmin(HeldAdmin):
    """The dispatcher's record: status, lock and error are read, never edited."""

    list_display = ["label", "issue_cell", "holder", "lock", "outcome", "started", "took"]
    list_filter = [RunLiveFilter, "status", "error", "lock_mode", "issue__project", "workspace"]
    related = ("issue", "agent", "worktree")
    issue_width = 24
    search_fields = ["issue__title", "=issue__id", "agent__name", "error_detail"]
    date_hierarchy = "started_at"

    @admin.display(description="run", ordering="pk")
    def label(self, obj: m.Run) -> SafeString:
        return format_html('<span class="nowrap">run {}</span>', obj.pk)

    @admin.display(description="worktree", ordering="worktree__slug")
    def lock(self, obj: m.Run) -> SafeString | str:
        """The worktree, and whether the run locks it (exclusive) or only reads it."""
        if obj.worktree is None:
            return display.NONE
        return format_html(
            '{}<br><span class="quiet">{}</span>',
            display.clip(obj.worktree.slug, 14),
            obj.lock_mode,
        )

    @admin.display(description="status", ordering="status")
    def outcome(self, obj: m.Run) -> SafeString:
        """The status, and the error that kept it from starting, if any."""
        if not obj.error:
            return format_html("{}", obj.status)
        return format_html(
            '{}<br><span class="quiet" title="{}">{}</span>',
            obj.status,
            obj.error_detail,
            obj.get_error_display(),
        )

    started = display.dated("started_at", "started")

    @admin.display(description="took")
    def took(self, obj: m.Run) -> SafeString | str:
        return display.took(obj.started_at, obj.finished_at)
