"""Business rules: plain functions taking the workspace and typed arguments."""
