"""Resources and their holds (invariant 20 (resources are counted)).

A resource (its name, capacity and description) is added and edited here through the
same services as the API (``services.resources``: a raised capacity wakes the calls
waiting for it), with the services' own checks as the form's errors. Its name and
workspace are fixed once made (the holds and the event log name it), and it is never
deleted here. A hold is written only by the services: read-only here, force-released
by an action that calls ``resources.force_release`` (``released``, the acting person
named in the event).
"""

from typing import Any

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import Count, F, IntegerField, OuterRef, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from coordination import models as m
from coordination.admin import display
from coordination.admin.fleet import HeldAdmin
from coordination.admin.forms import WorkspaceLinksForm
from coordination.admin.reporting import operator_name, report
from coordination.admin.sessions import ResourceHoldInline
from coordination.errors import CoordinationError
from coordination.liveness import DbNow, live_q
from coordination.services import operators
from coordination.services import resources as services


class ResourceAdminForm(WorkspaceLinksForm):
    """The services' checks, in their words, beside the field they name."""

    class Meta:
        model = m.Resource
        fields = "__all__"  # noqa: DJ007  (the ModelAdmin chooses; see forms.py)

    def clean_name(self) -> str:
        name = str(self.cleaned_data.get("name", ""))
        checked(services.check_name, name)
        return name

    def clean_capacity(self) -> int | None:
        capacity = self.cleaned_data.get("capacity")
        if capacity is not None:
            checked(services.check_capacity, capacity)
        return capacity

    def validate_unique(self) -> None:
        """A name taken in the workspace, as the API says it (the database's
        constraint stays the last word, in ``save_model``)."""
        workspace, name = self.cleaned_data.get("workspace"), self.cleaned_data.get("name")
        if self.instance.pk is not None or workspace is None or not name:
            return
        if m.Resource.objects.filter(workspace=workspace, name=name).exists():
            self.add_error("name", f"A resource named {name!r} exists already.")


def checked(check: Any, value: Any) -> None:
    try:
        check(value)
    except CoordinationError as error:
        raise ValidationError(error.detail) from None


def units_in_use() -> Coalesce:
    """The units of the resource's live holds (a dead session's are free at once)."""
    live = (
        m.ResourceHold.objects.live()
        .filter(resource=OuterRef("pk"))
        .order_by()
        .values("resource")
        .annotate(n=Sum("units"))
        .values("n")
    )
    return Coalesce(Subquery(live, output_field=IntegerField()), 0)


def calls_waiting() -> Coalesce:
    """The calls in the resource's line now."""
    line = (
        m.ResourceWait.objects.filter(resource=OuterRef("pk"), deadline__gt=DbNow())
        .filter(live_q("session__"))
        .order_by()
        .values("resource")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(line, output_field=IntegerField()), 0)


@admin.register(m.Resource)
class ResourceAdmin(admin.ModelAdmin):
    form = ResourceAdminForm
    list_display = ["name_cell", "workspace_cell", "in_use_cell", "waiting_cell", "note"]
    list_filter = ["workspace"]
    list_select_related = ["workspace"]
    search_fields = ["name", "description"]
    inlines = [ResourceHoldInline]
    name_cell = display.clipped("name", 32, description="name")
    workspace_cell = display.clipped(
        "workspace.slug", display.WORKSPACE_WIDTH, description="workspace"
    )
    note = display.clipped("description", 48, wrap=True, description="description")

    def get_queryset(self, request: HttpRequest) -> QuerySet[m.Resource]:
        return (
            super().get_queryset(request).annotate(in_use=units_in_use(), waiting=calls_waiting())
        )

    def get_inlines(self, request: HttpRequest, obj: Any = None) -> list[Any]:
        return list(self.inlines) if obj is not None else []  # a new one holds nothing

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["workspace", "name", "capacity", "description"]
        return ["workspace", "name", "capacity", "in_use_cell", "waiting_cell", "description"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        if obj is None:
            return []
        return ["workspace", "name", "in_use_cell", "waiting_cell"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # its holds and the event log name it; the API deletes none either

    @admin.display(description="in use", ordering="in_use")
    def in_use_cell(self, obj: Any) -> SafeString:
        """``1 of 2`` units in live holds, marked ``full`` when every unit is held."""
        full = obj.in_use >= obj.capacity
        return format_html(
            '<span class="nowrap" title="units in live holds, of its capacity">{} of {}</span>{}',
            obj.in_use,
            obj.capacity,
            mark_safe('<br><span class="state state-stalled">full</span>') if full else "",
        )

    @admin.display(description="waiting", ordering="waiting")
    def waiting_cell(self, obj: Any) -> int:
        return int(obj.waiting)

    def save_model(self, request: HttpRequest, obj: m.Resource, form: Any, change: bool) -> None:
        """Through the services, as the API: a raised capacity serves the line."""
        data = form.cleaned_data
        if change:
            saved = services.update_resource(
                workspace=obj.workspace,
                name=obj.name,
                capacity=data.get("capacity"),
                description=data.get("description"),
            )
        else:
            saved = services.create_resource(
                workspace=data["workspace"],
                name=data["name"],
                capacity=data["capacity"],
                description=data.get("description", ""),
            )
        obj.pk = saved.pk


@admin.register(m.ResourceHold)
class ResourceHoldAdmin(HeldAdmin):
    list_display = [
        "resource_cell",
        "units_cell",
        "issue_or_none",
        "holder",
        "acquired",
        "released",
    ]
    list_filter = [*HeldAdmin.list_filter, "resource"]
    related = ("resource", "issue", "agent")
    search_fields = ["resource__name", "agent__name", "=issue__id", "=session__id"]
    date_hierarchy = "acquired_at"
    actions = ["force_release"]
    fields = readonly_fields = (
        "resource",
        "workspace",
        "holder",
        "issue_or_none",
        "units_cell",
        "fence",
        "acquired",
        "released",
    )

    resource_cell = display.clipped("resource.name", 24, description="resource")

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: m.ResourceHold | None = None,
    ) -> Any:
        """The page's heading names the resource: ``ports · hold 12``."""
        if obj is not None:
            context["subtitle"] = f"{obj.resource.name} · hold {obj.pk}"
        return super().render_change_form(request, context, add, change, form_url, obj)

    acquired = display.dated("acquired_at", "acquired")

    @admin.display(description="issue", ordering="issue_id")
    def issue_or_none(self, obj: m.ResourceHold) -> SafeString | str:
        return display.NONE if obj.issue is None else display.issue_label(obj.issue, 28)

    @admin.display(description="units", ordering="units")
    def units_cell(self, obj: m.ResourceHold) -> SafeString:
        return display.units_and_slots(obj)

    @admin.action(description="Force-release selected resource holds (released; you are named)")
    def force_release(self, request: HttpRequest, queryset: QuerySet[m.ResourceHold]) -> None:
        operator = operator_name(request)
        outcome = operators.Outcome()
        for hold in queryset.select_related("resource").order_by(F("pk")):
            said = f"hold {hold.pk} of {hold.resource.name}"
            if services.force_release(hold=hold, operator=operator):
                outcome.done.append(said)
            else:
                outcome.refused.append(f"{said}: already released")
        report(self, request, "Force-released", outcome)
