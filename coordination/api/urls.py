from django.urls import path
from rest_framework.routers import DefaultRouter

from coordination.api import (
    events,
    file_claims,
    issues,
    keys,
    landings,
    links,
    messages,
    resources,
    runs,
    sessions,
    webhooks,
    work,
)

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
# No ".json" twins of every route: the API speaks JSON only, and the twins passed a
# format= argument that the custom actions do not take.
router.include_format_suffixes = False
# Django tries the patterns in order: the agents' most frequent calls (heartbeats,
# file claims and their release) first.
router.register("sessions", sessions.SessionViewSet, basename="session")
router.register("file-claims", file_claims.FileClaimViewSet, basename="file-claim")
router.register("projects", issues.ProjectViewSet, basename="project")
router.register("issues", issues.IssueViewSet, basename="issue")
router.register("leases", issues.LeaseViewSet, basename="lease")
router.register("wip-cap-denials", issues.WipCapDenialViewSet, basename="wip-cap-denial")
router.register("worktrees", runs.WorktreeViewSet, basename="worktree")
router.register("runs", runs.RunViewSet, basename="run")
router.register("claim-conflicts", file_claims.ClaimConflictViewSet, basename="claim-conflict")
router.register("messages", messages.MessageViewSet, basename="message")
router.register("resources", resources.ResourceViewSet, basename="resource")
router.register("resource-holds", resources.ResourceHoldViewSet, basename="resource-hold")
router.register("landings", landings.LandingViewSet, basename="landing")
router.register("webhooks", webhooks.WebhookViewSet, basename="webhook")
router.register("keys", keys.KeyViewSet, basename="key")

urlpatterns = [
    path("workflow/", issues.WorkflowView.as_view(), name="workflow"),
    path("work/start/", work.StartWorkView.as_view(), name="work-start"),
    path("work/finish/", work.FinishWorkView.as_view(), name="work-finish"),
    path("issues/<int:pk>/links/", links.IssueLinksView.as_view(), name="issue-links"),
    path("issues/<int:pk>/links/<int:link>/", links.IssueLinkView.as_view(), name="issue-link"),
    path("events/", events.EventListView.as_view(), name="events"),
    path("events/stream/", events.EventStreamView.as_view(), name="events-stream"),
    *router.urls,
]
