"""Admin forms that keep an object's links inside its own workspace (invariant 9 (workspace
isolation)).

A worktree, project or agent of another workspace is refused with an error on the
field that names it. When the workspace is known (an existing object, or an add page
opened with ``?workspace=<id>``) the choices are only that workspace's rows; otherwise
each choice shows its workspace. An existing object's workspace is fixed: its
sessions, leases, claims and logs stay in the workspace they were written in.

The database refuses the same links (migration 0003); these forms turn that rule
into a message instead of an error page.
"""

from typing import Any, ClassVar

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Model
from django.utils.text import capfirst

from coordination import models as m


class WorkspaceLinksForm(forms.ModelForm):
    """The workspace rule only: which fields show, and how, stays the ModelAdmin's
    choice (``fields``, ``fieldsets``, ``readonly_fields``), so the forms below list
    ``__all__`` and let the admin narrow them."""

    #: Foreign keys of the form whose target carries its own ``workspace``.
    workspace_links: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None and "workspace" in self.fields:
            self.fields["workspace"].disabled = True
            self.fields["workspace"].help_text = "An existing row never moves to another workspace."
        known = self._known_workspace_id()
        workspace = m.Workspace.objects.filter(pk=known).first() if known else None
        for name in self.workspace_links:
            field = self.fields.get(name)
            if not isinstance(field, forms.ModelChoiceField) or field.queryset is None:
                continue
            if workspace is not None:
                noun = self._noun(name)
                field.queryset = field.queryset.filter(workspace=workspace)
                field.error_messages["invalid_choice"] = (
                    f"That {noun} is not one of workspace “{workspace}”: "
                    f"choose one of this workspace."
                )
            else:
                field.queryset = field.queryset.select_related("workspace")
                field.label_from_instance = _with_workspace  # type: ignore[method-assign]
                field.help_text = "Must belong to the same workspace."

    def _known_workspace_id(self) -> int | None:
        if self.instance.pk is not None:
            return int(self.instance.workspace_id)
        if self.is_bound:  # an add form being saved: clean() says what is wrong
            return None
        initial = self.initial.get("workspace")
        if isinstance(initial, m.Workspace):
            return int(initial.pk)
        try:
            return int(initial) if initial not in (None, "") else None
        except (TypeError, ValueError):
            return None

    def _workspace(self) -> m.Workspace | None:
        if "workspace" in self.fields:
            workspace = self.cleaned_data.get("workspace")
            return workspace if isinstance(workspace, m.Workspace) else None
        return self.instance.workspace if self.instance.workspace_id else None

    def _noun(self, name: str) -> str:
        return str(self._meta.model._meta.get_field(name).verbose_name)

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        workspace = self._workspace()
        if workspace is None:
            return cleaned
        for name in self.workspace_links:
            target = cleaned.get(name)
            if target is None or target.workspace_id == workspace.pk:
                continue
            self.add_error(
                name,
                ValidationError(
                    "%(noun)s “%(target)s” belongs to workspace “%(other)s”, not to "
                    "“%(workspace)s”: choose one of workspace “%(workspace)s”.",
                    code="other_workspace",
                    params={
                        "noun": capfirst(self._noun(name)),
                        "target": target,
                        "other": target.workspace,
                        "workspace": workspace,
                    },
                ),
            )
        return cleaned


def _with_workspace(obj: Model) -> str:
    return f"{obj.workspace} / {obj}"  # type: ignore[attr-defined]


class IssueAdminForm(WorkspaceLinksForm):
    workspace_links = ("project", "worktree", "assignee")

    class Meta:
        model = m.Issue
        fields = "__all__"  # noqa: DJ007  (the ModelAdmin chooses; see above)


class AgentAdminForm(WorkspaceLinksForm):
    workspace_links = ("worktree",)

    class Meta:
        model = m.Agent
        fields = "__all__"  # noqa: DJ007  (the ModelAdmin chooses; see above)


class ProjectAdminForm(WorkspaceLinksForm):
    workspace_links = ("primary_worktree",)

    class Meta:
        model = m.Project
        fields = "__all__"  # noqa: DJ007  (the ModelAdmin chooses; see above)


class WorktreeAdminForm(WorkspaceLinksForm):
    """A worktree has no links to check, but once created it stays in its workspace:
    moving it would leave the issues, agents and projects that name it behind."""

    class Meta:
        model = m.Worktree
        fields = "__all__"  # noqa: DJ007  (the ModelAdmin chooses; see above)


class ApiKeyAdminForm(WorkspaceLinksForm):
    """A new key (invariant 13 (the key is the actor)): its kind, the agent an agent key acts as (of
    the key's workspace), whether it may force, when it expires. Only adding sets them: an
    existing key's kind, agent and force are fixed (mint another instead)."""

    workspace_links = ("agent",)
    DEFAULT = ""
    kind = forms.ChoiceField(
        choices=m.ApiKey.Kind.choices,
        required=False,
        initial=m.ApiKey.Kind.FLEET,
        help_text="fleet: acts for any agent; agent: only as its agent; read: reads only.",
    )
    force = forms.ChoiceField(
        label="Can force",
        choices=[
            (DEFAULT, "Default: yes for a fleet key, no for the others"),
            ("yes", "Yes"),
            ("no", "No"),
        ],
        required=False,
        help_text="May take file claims from their holders.",
    )

    class Meta:
        model = m.ApiKey
        fields = "__all__"  # noqa: DJ007  (the ModelAdmin chooses; see above)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if self.instance.pk is not None:
            return cleaned
        kind = cleaned.get("kind") or m.ApiKey.Kind.FLEET
        cleaned["kind"] = kind
        agent = cleaned.get("agent")
        if kind == m.ApiKey.Kind.AGENT and agent is None:
            self.add_error("agent", "An agent key needs the agent it acts as.")
        if kind != m.ApiKey.Kind.AGENT and agent is not None:
            self.add_error("agent", f"A {kind} key acts for no one agent: leave it empty.")
        force = cleaned.get("force")
        can_force = kind == m.ApiKey.Kind.FLEET if not force else force == "yes"
        if kind == m.ApiKey.Kind.READ and can_force:
            self.add_error("force", "A read key never writes, so it cannot force.")
        cleaned["can_force"] = can_force
        return cleaned
