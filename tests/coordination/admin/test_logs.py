"""The contention logs in the admin: read-only, dated, searchable."""

from datetime import timedelta

import pytest
from django.utils import timezone

from coordination.models import ClaimConflict
from tests.coordination.admin_helpers import populate, url

pytestmark = pytest.mark.django_db


def test_logs_have_a_date_hierarchy_and_search(operator, workspace):
    populate(workspace, 3)
    first = ClaimConflict.objects.order_by("pk").first()
    ClaimConflict.objects.create(  # a year back, dated at insert (the log is append-only)
        workspace=workspace,
        path="old/x.py",
        rejected_issue=first.rejected_issue,
        holding_issue=first.holding_issue,
        occurred_at=timezone.now() - timedelta(days=400),
    )
    page = operator.get(url(ClaimConflict) + "?q=src/f1.py").content.decode()
    assert "src/f1.py" in page and "src/f2.py" not in page
    assert "?occurred_at__year=" in page  # the date hierarchy, down from the years
