"""Claiming through the service, bound to the workspace."""

import pytest

from coordination.services import file_claims


@pytest.fixture
def claim(workspace):
    def call(issue, paths, session=None, force=False):
        return file_claims.claim_files(
            workspace=workspace,
            issue_id=issue.pk,
            paths=paths,
            session_id=session.pk if session is not None else None,
            force=force,
        )

    return call
