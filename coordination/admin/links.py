"""The issue page's links, both ways (invariant 16 (the work graph)): read-only here, since a link
is made or removed through the API, where the cycle check, the graph lock and the events
are (``coordination.services.graph``)."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from coordination import models as m


def issue_link(issue: m.Issue) -> SafeString:
    url = reverse("admin:coordination_issue_change", args=[issue.pk])
    return format_html('<a href="{}">#{} {}</a> ({})', url, issue.pk, issue.title, issue.status)


class LinkInline(admin.TabularInline):
    model = m.IssueLink
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class OutgoingLinkInline(LinkInline):
    """This issue *type* another: what it blocks, its children, what it relates to."""

    fk_name = "source"
    verbose_name = "link from this issue"
    verbose_name_plural = "links from this issue (it blocks, is parent of, ...)"
    fields = ["type", "other", "created_at"]
    readonly_fields = ["type", "other", "created_at"]

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).select_related("target").order_by("type", "id")

    @admin.display(description="issue")
    def other(self, link: m.IssueLink) -> SafeString:
        return issue_link(link.target)


class IncomingLinkInline(LinkInline):
    """Another *type* this issue: its blockers, its parent."""

    fk_name = "target"
    verbose_name = "link to this issue"
    verbose_name_plural = "links to this issue (blocked by, child of, ...)"
    fields = ["other", "type", "created_at"]
    readonly_fields = ["other", "type", "created_at"]

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).select_related("source").order_by("type", "id")

    @admin.display(description="issue")
    def other(self, link: m.IssueLink) -> SafeString:
        return issue_link(link.source)
