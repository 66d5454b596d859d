"""File claims: path-level reservations against an issue (invariants 4 (stale reclaim), 5
(all-or-nothing), 6 (paths are literal), 7 (release reasons), 8 (append-only logs) and 11
(overlap)).

Issue leases stop two agents from taking one ticket; file claims stop two agents on
different tickets from editing one file; a directory claim (``src/api/``) holds the
whole subtree. The tiers are independent: a claim names an
issue, but its claimer need not hold that issue's lease. ``claim`` takes them,
``release`` gives them back; ``check`` says what a claim would refuse; ``refusal`` is a
refused claim and its log.
"""

from coordination.paths import MAX_CHECK_PATHS, MAX_PATHS
from coordination.services.file_claims.check import (
    HeldClaim,
    Holder,
    check_files,
    holders_of,
    overlapping_claims,
)
from coordination.services.file_claims.claim import (
    ClaimedFiles,
    claim_files,
    claim_or_refusal,
)
from coordination.services.file_claims.refusal import (
    ClaimRefused,
    Refusal,
    announce_refusal,
    file_conflict,
    holders,
    log_conflicts,
    log_refusal,
)
from coordination.services.file_claims.release import (
    release_claims,
    release_files,
    release_issue_claims,
    release_session_claims,
)

__all__ = [
    "MAX_CHECK_PATHS",
    "MAX_PATHS",
    "ClaimRefused",
    "HeldClaim",
    "Holder",
    "ClaimedFiles",
    "Refusal",
    "announce_refusal",
    "check_files",
    "claim_files",
    "claim_or_refusal",
    "file_conflict",
    "holders",
    "holders_of",
    "log_conflicts",
    "log_refusal",
    "overlapping_claims",
    "release_claims",
    "release_files",
    "release_issue_claims",
    "release_session_claims",
]
