"""Issues: the list with who holds each, and a page that shows the issue's lease,
claims, conflicts, messages and report, and moves it through the workflow.

Status moves only through ``operators.transition_issues`` (the list's actions and
the page's buttons alike), as a person: the review gate passes, every other rule
of the workflow holds.
"""

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Prefetch, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST

from coordination import models as m
from coordination.admin import display, forms, issue_page
from coordination.admin.links import IncomingLinkInline, OutgoingLinkInline
from coordination.admin.reporting import report
from coordination.admin.tracker import KeptAdmin
from coordination.services import events, operators, projects, workflow

MOVE_FORM = "issue-transition"  # the page's buttons post this form, not the change form


def transition_action(to: str) -> Callable[..., None]:
    """An action moving the selected issues to ``to`` through the workflow, as a
    person: the human review gate passes here; every other rule still holds."""

    def move(model_admin: admin.ModelAdmin, request: HttpRequest, queryset: Any) -> None:
        report(
            model_admin,
            request,
            f"Moved to {to}",
            operators.transition_issues(
                issues=queryset, to=to, operator=request.user.get_username()
            ),
        )

    move.__name__ = f"move_to_{to}"
    gate = " (passes the review gate)" if to == m.Issue.Status.DONE else ""
    return admin.action(description=f"Move selected issues to {to}{gate}")(move)


def held_leases() -> Prefetch:
    """An issue's unreleased lease (one at most) with its holder, as ``held_leases``."""
    held = (
        m.IssueLease.objects.unreleased()
        .select_related("agent", "session__agent")
        .annotate(holder_state=display.session_state("session__"))
    )
    return Prefetch("leases", queryset=held, to_attr="held_leases")


@admin.register(m.Issue)
class IssueAdmin(KeptAdmin):
    form = forms.IssueAdminForm
    change_form_template = "admin/coordination/issue/change_form.html"
    list_display = ["label", "project_key", "state", "assignee_cell", "holder"]
    list_filter = ["status", "priority", "project", "requires_filesystem", "workspace"]
    list_select_related = ["project", "assignee"]
    search_fields = ["title", "description", "=id"]
    inlines = [IncomingLinkInline, OutgoingLinkInline]  # the work graph, both ways

    def save_model(self, request: HttpRequest, obj: m.Issue, form: Any, change: bool) -> None:
        with events.change():
            super().save_model(request, obj, form, change)
            if not change:
                projects.announce_created(obj)

    fieldsets = [
        ("State", {"fields": ["status_moves", "lease", "created", "updated"]}),
        (
            None,
            {
                "fields": [
                    "workspace",
                    "project",
                    "title",
                    "description",
                    "priority",
                    "requires_filesystem",
                    "worktree",
                    "assignee",
                ]
            },
        ),
        ("Completion report", {"fields": ["summary", "verification", "pull_request"]}),
    ]
    # Status moves only by the workflow (actions, the page's buttons); the report is
    # the worker's word.
    readonly_fields = [
        "status_moves",
        "lease",
        "created",
        "updated",
        "summary",
        "verification",
        "pull_request",
    ]
    actions = [transition_action(status) for status in m.Issue.Status]

    def get_queryset(self, request: HttpRequest) -> QuerySet[m.Issue]:
        return super().get_queryset(request).prefetch_related(held_leases())

    def get_inlines(self, request: HttpRequest, obj: Any) -> Any:
        # Shown, never posted: the links are read-only here (a formset would make every
        # save of the issue carry their management form for nothing).
        return self.inlines if obj is not None and request.method == "GET" else []

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        # A new issue has no state or report yet: its status is the workflow's first.
        return self.fieldsets if obj is not None else self.fieldsets[1:2]

    def get_urls(self) -> list[URLPattern]:
        move = self.admin_site.admin_view(require_POST(self.transition_view))
        return [
            path("<path:object_id>/transition/", move, name="coordination_issue_transition"),
            *super().get_urls(),
        ]

    def transition_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """A button of the page: the issue to the posted status, then the page again."""
        issue = self.get_object(request, object_id)
        if issue is None:
            raise Http404(f"No issue {object_id}.")
        if not self.has_change_permission(request, issue):
            raise PermissionDenied
        to = request.POST.get("to", "")
        chosen = m.Issue.objects.filter(pk=issue.pk)
        moved = operators.transition_issues(
            issues=chosen, to=to, operator=request.user.get_username()
        )
        report(self, request, f"Moved to {to}", moved)
        return HttpResponseRedirect(reverse("admin:coordination_issue_change", args=[issue.pk]))

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> Any:
        if obj is not None and obj.pk is not None:
            context["move_form"] = MOVE_FORM
            context["panels"] = issue_page.panels(obj)
        return super().render_change_form(request, context, add, change, form_url, obj)

    # --- the list ------------------------------------------------------------------

    @admin.display(description="issue", ordering="pk")
    def label(self, obj: m.Issue) -> SafeString | str:
        return display.issue_label(obj, 32)

    @admin.display(description="status", ordering="status")
    def state(self, obj: m.Issue) -> SafeString:
        """The status, and its priority below it when it has one."""
        if obj.priority == m.Issue.Priority.NONE:
            return format_html("{}", obj.get_status_display())
        return format_html(
            '{}<br><span class="quiet">{}</span>',
            obj.get_status_display(),
            obj.get_priority_display(),
        )

    project_key = display.clipped("project.key", 10, description="project")
    assignee_cell = display.clipped("assignee.name", display.AGENT_WIDTH, description="assignee")

    @admin.display(description="holder")
    def holder(self, obj: m.Issue) -> SafeString | str:
        leases = getattr(obj, "held_leases", [])
        return display.holder(leases[0]) if leases else display.NONE

    # --- the page --------------------------------------------------------------------

    @admin.display(description="status")
    def status_moves(self, obj: m.Issue) -> SafeString:
        """The status, and a button for each move the workflow allows from it."""
        moves = workflow.TRANSITIONS.get(obj.status, ())
        buttons = format_html_join(
            " ",
            '<button type="submit" class="move" form="{}" name="to" value="{}">→ {}{}</button>',
            (
                (
                    MOVE_FORM,
                    to,
                    to,
                    " (review gate)" if (obj.status, to) in workflow.HUMAN_GATES else "",
                )
                for to in moves
            ),
        )
        return format_html(
            '<b class="status">{}</b> <span class="moves">{}</span>', obj.status, buttons
        )

    @admin.display(description="lease")
    def lease(self, obj: m.Issue) -> SafeString | str:
        leases = getattr(obj, "held_leases", [])
        if not leases:
            return "Not leased."
        held = leases[0]
        address = reverse("admin:coordination_issuelease_change", args=[held.pk])
        return format_html(
            '{} · <a href="{}">lease {}</a>, fence {}, since {}',
            display.holder(held, stacked=False),
            address,
            held.pk,
            held.fence,
            display.when(held.acquired_at),
        )

    created = display.dated("created_at", "created")
    updated = display.dated("updated_at", "updated")

    def report_field(self, obj: m.Issue, name: str) -> str:
        return (obj.report or {}).get(name) or display.NONE

    @admin.display(description="summary")
    def summary(self, obj: m.Issue) -> str:
        return self.report_field(obj, "summary")

    @admin.display(description="verification")
    def verification(self, obj: m.Issue) -> str:
        return self.report_field(obj, "verification")

    @admin.display(description="pull request")
    def pull_request(self, obj: m.Issue) -> SafeString | str:
        link = self.report_field(obj, "pr_link")
        if link.startswith(("https://", "http://")):
            return format_html('<a href="{}" rel="noopener noreferrer">{}</a>', link, link)
        return link
