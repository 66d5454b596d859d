from django.urls import path

from coordination.guard import views

urlpatterns = [
    path("pre-commit", views.pre_commit, name="guard-pre-commit"),
]

# Mounted at /agent/ by the project's URLconf.
agent_urlpatterns = [
    path("projektor", views.agent_command, name="agent-command"),
]
