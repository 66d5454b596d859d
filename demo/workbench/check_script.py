"""The check of a generated repository, ``check.py``: its text and its words."""

CHECK = "check.py"
CHECK_SECONDS = 10.0  # the check's sleep: a slow suite's time
CHECK_SECONDS_VARIABLE = "WORKBENCH_CHECK_SECONDS"  # overrides it (0: the audit after a run)
FAILED = "FAIL "  # how the check starts each failure's line

CHECK_SCRIPT = '''#!/usr/bin/env python3
"""The workbench's check: every module of src/ imported, every check_ function run.

    python check.py

It sleeps first, as a slow suite takes its time (without spending the CPU): SECONDS,
or WORKBENCH_CHECK_SECONDS when set. Then each failure is said on a line of its own,
"FAIL <module>[.<function>]: <error>", and a summary last. Exit status: 0 when
everything passed, 1 when something failed.
"""

import importlib
import os
import sys
import time
from pathlib import Path

SECONDS = 10.0


def main():
    sys.dont_write_bytecode = True  # nothing written in the checkout
    root = Path(__file__).resolve().parent
    seconds = float(os.environ.get("WORKBENCH_CHECK_SECONDS") or SECONDS)
    time.sleep(seconds)
    sys.path.insert(0, str(root / "src"))
    failures, passed = [], 0
    for path in sorted((root / "src").rglob("*.py")):
        parts = path.relative_to(root / "src").with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        try:
            module = importlib.import_module(name)
        except Exception as error:
            failures.append(f"FAIL {name}: import failed: {type(error).__name__}: {error}")
            continue
        for attribute, value in sorted(vars(module).items()):
            if attribute.startswith("check_") and callable(value):
                try:
                    value()
                except Exception as error:
                    said = f"{type(error).__name__}: {error}".rstrip(": ")
                    failures.append(f"FAIL {name}.{attribute}: {said}")
                else:
                    passed += 1
    for line in failures:
        print(line)
    print(f"check: {passed} passed, {len(failures)} failed (slept {seconds:g} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
'''
