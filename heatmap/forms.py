"""The query string of the heatmap and health views, one Django form for the API and
the pages alike: a bad mode, depth, date or window is a 400 naming the field.

The messages are the API's, as its clients have always read them.
"""

from datetime import timedelta
from typing import Any

from django import forms
from django.utils import timezone

from coordination.errors import CoordinationError
from coordination.models import Workspace
from coordination.paths import normalise_prefix
from coordination.selectors import lookups
from heatmap import selectors
from heatmap.selectors import DEFAULT_DEPTH, MAX_DEPTH, MODES

ISO_8601 = (
    "Datetime has wrong format. Use one of these formats instead: "
    "YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z]."
)
OUT_OF_RANGE = "The window must lie within the years 1 to 9999."
DEFAULT_WINDOW = timedelta(days=7)
TOO_LONG = "Ensure this field has no more than %(limit_value)d characters."
# A sent-back note, with its "Sent back by <name>: " prefix, fits a message (10,000).
REVIEW_NOTE_LIMIT = 9000


def moment() -> forms.DateTimeField:
    # ISO 8601 only (no input_formats): what the API documents, and what
    # ``datetime-local`` inputs send.
    return forms.DateTimeField(
        required=False, input_formats=[], error_messages={"invalid": ISO_8601}
    )


class WindowForm(forms.Form):
    """``since <= t < until``; ``until`` defaults to now, ``since`` to a window before it
    (one default for every page, so the heatmap and health tell of the same days)."""

    default_window = DEFAULT_WINDOW

    since = moment()
    until = moment()

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:  # the window is judged once its fields parse
            return data
        try:  # shown and answered in the server's time zone, whatever offset was sent
            until = timezone.localtime(data.get("until") or timezone.now())
            since = timezone.localtime(data.get("since") or until - self.default_window)
        except OverflowError as error:  # e.g. until=0001-01-01: a window before year 1
            raise forms.ValidationError({"since": OUT_OF_RANGE}) from error
        if since >= until:
            raise forms.ValidationError({"since": "since must be earlier than until."})
        return {**data, "since": since, "until": until}


class HeatmapForm(WindowForm):
    """The window, plus what to count and where: a missing mode or depth is its
    ``initial`` value (the default the schema documents)."""

    mode = forms.ChoiceField(
        choices=[(mode, mode) for mode in MODES],
        required=False,
        initial="claims",
        error_messages={"invalid_choice": '"%(value)s" is not a valid choice.'},
    )
    project = forms.CharField(
        required=False, max_length=100, error_messages={"max_length": TOO_LONG}
    )
    # Not the form's own ``prefix`` (for field names): the form's metaclass moves
    # declared fields off the class, so that attribute stays as Django sets it.
    prefix = forms.CharField(  # type: ignore[assignment]
        required=False, strip=False, max_length=1024, error_messages={"max_length": TOO_LONG}
    )
    depth = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_DEPTH,
        initial=DEFAULT_DEPTH,
        error_messages={"invalid": "A valid integer is required."},
    )

    def clean_mode(self) -> str:
        return self.cleaned_data["mode"] or self.fields["mode"].initial

    def clean_depth(self) -> int:
        depth = self.cleaned_data["depth"]
        return self.fields["depth"].initial if depth is None else depth

    def heatmap_arguments(self, workspace: Workspace) -> dict[str, Any]:
        """The valid query as keyword arguments of ``code_heatmap``; an unknown project
        or a prefix that is not a valid path is a domain error (400)."""
        query = self.cleaned_data
        key = query["project"]
        return {
            "mode": query["mode"],
            "since": query["since"],
            "until": query["until"],
            "project": lookups.get_project(workspace, key) if key else None,
            "prefix": selectors.normalise_prefix(query["prefix"]),
            "depth": query["depth"],
        }


class BoardForm(WindowForm):
    """The board's filters: a project key, an agent name, text in the title (or an id)."""

    project = forms.CharField(
        required=False, max_length=100, error_messages={"max_length": TOO_LONG}
    )
    agent = forms.CharField(required=False, max_length=100, error_messages={"max_length": TOO_LONG})
    text = forms.CharField(required=False, max_length=300, error_messages={"max_length": TOO_LONG})

    def resolve(self, workspace: Workspace) -> None:
        """Unknown project or agent: an error on its field, shown in place."""
        for name, lookup in (
            ("project", lookups.get_project),
            ("agent", lookups.get_agent),
        ):
            key = self.cleaned_data.get(name)
            self.cleaned_data[f"{name}_object"] = None
            if key:
                try:
                    self.cleaned_data[f"{name}_object"] = lookup(workspace, key)
                except CoordinationError:
                    self.add_error(name, f"No {name} {key!r} in this workspace.")


class PathForm(WindowForm):
    """``?path=``: a file or a directory, spelled as claims are (normalised), with
    or without a directory's trailing ``/``: its page shows everything under it."""

    path = forms.CharField(
        strip=False, max_length=1024, error_messages={"required": "Name a path: ?path=src/a.py"}
    )

    def clean_path(self) -> str:
        try:
            return normalise_prefix(self.cleaned_data["path"])
        except CoordinationError as error:
            raise forms.ValidationError(error.detail) from error


class ReviewForm(forms.Form):
    """The issue page's review of work in review: accept it (done), or send it back to
    the queue with a note for its agent."""

    decision = forms.ChoiceField(choices=[("accept", "Accept"), ("send_back", "Send back")])
    note = forms.CharField(required=False, max_length=REVIEW_NOTE_LIMIT, strip=True)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("decision") == "send_back" and not data.get("note"):
            self.add_error("note", "Say what to change: the note is posted to the issue.")
        return data
