"""The pre-commit guard: a standalone git hook (``pre_commit.py``) and its download."""
