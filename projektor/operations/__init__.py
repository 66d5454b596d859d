"""Operations (docs/api.md, "Operations"): health and readiness, Prometheus metrics,
request logs with ids, the static-files start check and backups."""
