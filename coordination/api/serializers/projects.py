"""Projects: the create/update body and the project as shown."""

from rest_framework import serializers

from coordination.api.serializers.fields import SlugRefField, StrictCharField
from coordination.models import Project


class ProjectInput(serializers.Serializer):
    key = serializers.SlugField(max_length=32)
    name = StrictCharField(max_length=200)
    agent_wip_limit = serializers.IntegerField(min_value=1, max_value=100_000, required=False)
    primary_worktree = SlugRefField(required=False, allow_null=True)


class ProjectSerializer(serializers.ModelSerializer):
    primary_worktree = serializers.CharField(
        source="primary_worktree.slug", read_only=True, allow_null=True
    )

    class Meta:
        model = Project
        fields = ["id", "key", "name", "agent_wip_limit", "primary_worktree", "created_at"]
