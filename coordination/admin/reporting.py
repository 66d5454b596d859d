"""How admin actions tell the operator what happened."""

from django.contrib import admin, messages
from django.http import HttpRequest

from coordination.services import operators


def report(
    model_admin: admin.ModelAdmin, request: HttpRequest, verb: str, outcome: operators.Outcome
) -> None:
    """What the action did, and what it could not do and why, in the message bar."""
    if outcome.done:
        model_admin.message_user(
            request, f"{verb} {len(outcome.done)}: {', '.join(outcome.done)}.", messages.SUCCESS
        )
    if outcome.refused:
        model_admin.message_user(
            request,
            f"Not done ({len(outcome.refused)}): {'; '.join(outcome.refused)}.",
            messages.WARNING,
        )


def operator_name(request: HttpRequest) -> str:
    return request.user.get_username()
