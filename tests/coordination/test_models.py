"""The coordination tables keep the original schema's names (DESIGN.md, Words)."""

import pytest
from django.db import connection

from coordination.models import AgentSession, ClaimConflict, FileClaim, IssueLease, WipCapDenial

ORIGINAL_NAMES = {
    AgentSession: "agent_sessions",
    IssueLease: "issue_leases",
    FileClaim: "issue_file_claims",
    ClaimConflict: "claim_conflicts",
    WipCapDenial: "wip_cap_denials",
}


@pytest.mark.django_db
def test_coordination_tables_carry_their_original_names():
    tables = set(connection.introspection.table_names())
    for model, name in ORIGINAL_NAMES.items():
        assert model._meta.db_table == name and name in tables
