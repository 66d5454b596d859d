"""The message service checks what the API checks."""

import pytest

from coordination.errors import InvalidInput
from coordination.models import Message
from coordination.services import messages

pytestmark = pytest.mark.django_db


def test_the_service_checks_what_the_api_checks(workspace, issue):
    with pytest.raises(InvalidInput):
        messages.post_message(workspace=workspace, scope=f"issue:{issue.pk}", body="")
    with pytest.raises(InvalidInput):
        messages.post_message(workspace=workspace, scope=f"issue:{issue.pk}", body="x" * 10_001)
    with pytest.raises(InvalidInput):
        messages.post_message(workspace=workspace, scope=f"issue:{issue.pk}", body="bad \ud800")
    assert not Message.objects.exists()
