from django.urls import path

from coordination.guard import views

urlpatterns = [
    path("pre-commit", views.pre_commit, name="guard-pre-commit"),
]
