"""The work graph: links between issues, and the files an issue expects to touch."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from coordination.liveness import DbNow
from coordination.models.tenancy import Workspace
from coordination.models.tracker import Issue


class LinkType(models.TextChoices):
    """ "source *type* target": ``blocks`` and ``parent_of`` make the graph that may
    never close a cycle (invariant 16 (the work graph)); the other two only relate."""

    BLOCKS = "blocks"
    PARENT_OF = "parent_of"
    RELATES_TO = "relates_to"
    DISCOVERED_FROM = "discovered_from"


# The types whose links must stay acyclic, and the one that gives a child one parent.
ORDERED_TYPES = frozenset({LinkType.BLOCKS, LinkType.PARENT_OF})


class IssueLink(models.Model):
    """One edge: ``source`` *type* ``target``, both issues of ``workspace``."""

    # Every index of the table starts with an issue: no index of its own.
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    type = models.CharField(max_length=20, choices=LinkType.choices)
    source = models.ForeignKey(
        Issue, on_delete=models.CASCADE, related_name="outgoing_links", db_index=False
    )
    target = models.ForeignKey(
        Issue, on_delete=models.CASCADE, related_name="incoming_links", db_index=False
    )
    created_at = models.DateTimeField(db_default=DbNow(), editable=False)

    class Meta:
        db_table = "issue_links"
        constraints = [
            # One link of a type between two issues: creating it again finds it.
            models.UniqueConstraint(fields=["source", "type", "target"], name="issue_link_unique"),
            # A child has one parent.
            models.UniqueConstraint(
                fields=["target"],
                condition=Q(type=LinkType.PARENT_OF),
                name="issue_link_one_parent",
            ),
            models.CheckConstraint(
                condition=~Q(source=F("target")), name="issue_link_not_to_itself"
            ),
        ]
        indexes = [
            # The other direction: what blocks an issue, its parent.
            models.Index(fields=["target", "type", "source"], name="issue_link_incoming"),
        ]

    def __str__(self) -> str:
        return f"#{self.source_id} {self.type} #{self.target_id}"


class ExpectedPath(models.Model):
    """A file or directory the issue's work is expected to touch (``issue.paths``),
    normalised like a claim, stored once per ``probe``: the path itself and every
    directory above it, each a claim that would hold it (invariant 11 (overlap)'s equality
    probes). A directory's own row carries ``subtree_end`` (other rows ``""``), so
    the claims under it are one range scan (``probe < path < subtree_end``). The
    ready queue finds an
    issue's collisions with live claims by these rows alone: index lookups whose
    cost follows the issue's paths, not the number of claims held."""

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    issue = models.ForeignKey(
        Issue, on_delete=models.CASCADE, related_name="expected_paths", db_index=False
    )
    path = models.CharField(max_length=1024)
    probe = models.CharField(max_length=1024)
    subtree_end = models.CharField(max_length=1024, blank=True, default="")

    class Meta:
        db_table = "issue_expected_paths"
        constraints = [
            models.UniqueConstraint(
                fields=["issue", "path", "probe"], name="issue_expected_path_unique"
            )
        ]

    def __str__(self) -> str:
        return self.path
