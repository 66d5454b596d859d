"""The body of an error in the API reference: the error shape, ``{"code", "detail"}``,
with the fields each code adds (docs/api.md, "Errors"), as the schema of an operation's
error responses (``refusals.errors``, and ``hooks.postprocess`` for the shared ones).
"""

import copy
from collections.abc import Iterable
from typing import Any

NULLABLE_INT = {"type": "integer", "nullable": True}
NULLABLE_STR = {"type": "string", "nullable": True}
STRINGS = {"type": "array", "items": {"type": "string"}}
# Who holds what was refused; one shape for both codes that name a holder.
HOLDER = {
    "type": "object",
    "properties": {
        "session": NULLABLE_INT,
        "agent": NULLABLE_STR,
        "run": {**NULLABLE_INT, "description": "The run holding the worktree (worktree_busy)."},
    },
}
# The fields a code adds to {"code", "detail"} (docs/api.md, "Errors").
EXTRA_FIELDS: dict[str, dict[str, Any]] = {
    "invalid": {
        "errors": {"description": "The validation errors, per field."},
        "field": {"type": "string", "description": "The body field that names no row here."},
        "path": {"type": "string", "description": "The rejected path."},
        "count": {"type": "integer", "description": "How many paths were given."},
    },
    "lease_held": {"holder": HOLDER},
    "wip_limit_reached": {"limit": {"type": "integer", "description": "The project's cap."}},
    "file_conflict": {
        "conflicts": {
            "type": "array",
            "description": "Each (requested path, overlapping holder), the first 100.",
            "items": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The requested path."},
                    "held_path": {
                        "type": "string",
                        "description": "The holder's claim: `path` itself, a directory "
                        "claim above it, or a claim under it (a requested directory).",
                    },
                    "issue": {"type": "integer"},
                    "session": NULLABLE_INT,
                    "agent": NULLABLE_STR,
                },
            },
        },
        "conflicts_total": {"type": "integer", "description": "How many conflicts in all."},
    },
    "worktree_busy": {
        "holder": HOLDER,
        "run": {"type": "integer", "description": "This run, recorded `cancelled`."},
    },
    "invalid_transition": {
        "allowed": {**STRINGS, "description": "The statuses the issue may move to."},
        "missing": {**STRINGS, "description": "What the move lacks: ready fields, `report`."},
    },
    "stale_fence": {"fence": {"type": "integer"}, "current_fence": NULLABLE_INT},
    "landing_exists": {"landing": {**NULLABLE_INT, "description": "The issue's open entry."}},
    "resource_busy": {
        "resource": {"type": "string"},
        "holders": {
            "type": "array",
            "description": "The resource's live holds, each as /resource-holds/ shows it.",
            "items": {"$ref": "#/components/schemas/Hold"},
        },
        "available": {"type": "integer", "description": "Units free now."},
        "waiting": {
            "type": "integer",
            "description": "Calls waiting in line now, as the resource's GET shows them: a "
            "waiting call that ran out counts its own place.",
        },
    },
    "worktree_unresolved": {"run": {"type": "integer", "description": "This run, `skipped`."}},
    "blocked": {
        "blocked_by": {
            "type": "array",
            "description": "The issue's unresolved blockers.",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "title": {"type": "string"},
                    "status": {"type": "string"},
                },
            },
        }
    },
    "dependency_cycle": {
        "cycle": {
            "type": "array",
            "items": {"type": "integer"},
            "description": "The issues of the cycle the link would close, from its source.",
        }
    },
}


def error_schema(codes: Iterable[str]) -> dict[str, Any]:
    """The error shape with ``codes`` as its ``code`` and the fields they add."""
    codes = list(dict.fromkeys(codes))
    extra = {name: field for code in codes for name, field in EXTRA_FIELDS.get(code, {}).items()}
    extra = copy.deepcopy(extra)  # each response its own: a reader may edit the document
    return {
        "type": "object",
        "description": 'The error shape: {"code", "detail", ...}.',
        "properties": {
            "code": {"type": "string", "enum": codes},
            "detail": {"type": "string", "description": "What happened, for people."},
            **extra,
        },
        "required": ["code", "detail"],
    }
