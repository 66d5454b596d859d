"""The work graph: a link's body and shape, and an issue's place in the graph."""

from typing import Any

from rest_framework import serializers

from coordination.api.serializers.base import SharedInputFields
from coordination.api.serializers.fields import IdField, StrictChoiceField
from coordination.models import Issue, LinkType
from coordination.selectors.graph import Link, graph_of


class LinkInput(SharedInputFields, serializers.Serializer):
    type = StrictChoiceField(
        choices=LinkType.choices, help_text="This issue *type* target: blocks, parent_of, ..."
    )
    target = IdField(help_text="The other issue's id (of this workspace).")


class LinkSerializer(serializers.Serializer):
    """``{"id", "type", "source", "target", "created_at"}``, from a link row or from
    the graph an issue was read with."""

    id = serializers.IntegerField()
    type = serializers.CharField()
    source = serializers.SerializerMethodField()  # type: ignore[assignment]  # a field named so
    target = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()

    def get_source(self, link: Any) -> int:
        return int(link.source if isinstance(link, Link) else link.source_id)

    def get_target(self, link: Any) -> int:
        return int(link.target if isinstance(link, Link) else link.target_id)


class BlockerSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    status = serializers.CharField()


class CollisionSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="The expected path.")
    held_path = serializers.CharField(help_text="The live claim that holds it.")
    issue = serializers.IntegerField(help_text="The holding issue.")
    agent = serializers.CharField(allow_null=True)


class GraphFields(serializers.Serializer):
    """The issue shape's graph fields (docs/api.md, the work graph), read off the
    graph the issue was loaded with (``selectors.graph``): no query per issue."""

    blocked_by = serializers.SerializerMethodField()
    blocks = serializers.SerializerMethodField()
    parent = serializers.SerializerMethodField()  # type: ignore[assignment]  # a field named so
    children = serializers.SerializerMethodField()
    links = serializers.SerializerMethodField()
    paths = serializers.SerializerMethodField()

    def get_blocked_by(self, issue: Issue) -> list[dict[str, Any]]:
        return BlockerSerializer(graph_of(issue).blocked_by, many=True).data  # type: ignore[return-value]

    def get_blocks(self, issue: Issue) -> list[int]:
        return graph_of(issue).blocks

    def get_parent(self, issue: Issue) -> int | None:
        return graph_of(issue).parent

    def get_children(self, issue: Issue) -> dict[str, int]:
        return graph_of(issue).children

    def get_links(self, issue: Issue) -> list[dict[str, Any]]:
        return LinkSerializer(graph_of(issue).links, many=True).data  # type: ignore[return-value]

    def get_paths(self, issue: Issue) -> list[str]:
        return graph_of(issue).paths
