"""Daily rollups of the heatmap's two event logs, kept exact by database triggers.

One ``RollupKey`` per (workspace, project, mode, path) ever counted, with its
``total`` and the ``first_day`` and ``last_day`` of its events, and one ``RollupDay``
per key and UTC day *from its first day to its last, every one*: ``n`` events that
day (none, on a day between two with events) and ``before`` events on the days
before it. So the count of a key on any run of whole days ``[start, end)`` is
``C(end) - C(start)``, with ``C(day)`` the ``before`` of the key's row of ``day``,
``0`` before its first day and its ``total`` after its last, as it is at the end of
every window that ends now (``heatmap.rollups``). A window's start is then one day:
its rows of all keys are one range of the (day, key) index, read in one pass however
long the history and however wide the window. The triggers
(``heatmap.rollups.triggers``) maintain both in the transaction that writes the
event rows; a day's row, once made, stays (its ``n`` may fall back to 0).
"""

from django.db import models

from coordination.models import Project, Workspace


class RollupMode(models.TextChoices):
    CLAIMS = "claims"  # issue_file_claims rows, by claimed_at
    CONTENTION = "contention"  # claim_conflicts rows, by occurred_at


class RollupKey(models.Model):
    """A path counted in one mode for one project; ``first_day`` and ``last_day``
    bound its days with events, so a window skips the keys it cannot touch, and
    ``total`` is its events on all of them."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    mode = models.CharField(max_length=16, choices=RollupMode.choices)
    path = models.CharField(max_length=1024)
    first_day = models.DateField()
    last_day = models.DateField()
    total = models.BigIntegerField(default=0)

    class Meta:
        db_table = "heatmap_rollup_keys"
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "project", "mode", "path"], name="one_rollup_key_per_path"
            )
        ]
        indexes = [
            models.Index(fields=["workspace", "mode", "last_day"], name="rollup_keys_by_last_day")
        ]

    def __str__(self) -> str:
        return f"{self.mode} {self.path}"


class RollupDay(models.Model):
    """One key's events on one UTC day (``n``) and on all its days before (``before``)."""

    # Indexed by the unique (key, day) below, which the deletes of a key use too.
    key = models.ForeignKey(
        RollupKey, on_delete=models.CASCADE, related_name="days", db_index=False
    )
    day = models.DateField()
    n = models.BigIntegerField()
    before = models.BigIntegerField()

    class Meta:
        db_table = "heatmap_rollup_days"
        constraints = [
            models.UniqueConstraint(fields=["key", "day"], name="one_rollup_row_per_key_day")
        ]
        # A window's edge: one day's rows of every key, with the count before it.
        indexes = [models.Index(fields=["day", "key", "before"], name="rollup_days_by_day")]

    def __str__(self) -> str:
        return f"{self.key_id} {self.day}: {self.n}"


class DayCountSeries(models.TextChoices):
    """The health page's per-day series and the board's per issue, each from one
    table by one time column."""

    CONFLICTS = "conflicts"  # claim_conflicts by occurred_at; kind "rejected" or "forced"
    WIP_DENIALS = "wip_denials"  # wip_cap_denials by occurred_at; kind ""
    LEASE_RELEASES = "lease_releases"  # issue_leases by released_at; kind the reason
    CLAIM_RELEASES = "claim_releases"  # issue_file_claims by released_at; kind the reason
    # The board's, each kind an issue's id:
    ISSUE_CLAIMS = "issue_claims"  # issue_file_claims by claimed_at
    ISSUE_REJECTED = "issue_rejected"  # claim_conflicts by occurred_at, the rejected issue
    ISSUE_HELD = "issue_held"  # and the holding issue, when it is another


class DayCount(models.Model):
    """Part of one workspace's count of one series, kind and UTC day: the day's count
    is the sum of its rows. Each writer adds to a row no other open transaction holds
    (``heatmap.rollups.day_counts``), so writers of one workspace never queue on a
    counter, and a day has about as many rows as it had writers at once."""

    # No constraint: a trigger may add to a count while the workspace's rows are
    # deleted (a cascade, in whatever order), and an insert needs no check of it.
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    series = models.CharField(max_length=16, choices=DayCountSeries.choices)
    kind = models.CharField(max_length=32, blank=True)
    day = models.DateField()
    n = models.BigIntegerField()

    class Meta:
        db_table = "heatmap_day_counts"
        indexes = [
            # A series' days (the health page), and one kind's days (a board card).
            models.Index(fields=["workspace", "series", "day", "kind"], name="day_counts_by_day"),
            models.Index(fields=["workspace", "series", "kind", "day"], name="day_counts_by_kind"),
        ]

    def __str__(self) -> str:
        return f"{self.series} {self.kind} {self.day}: {self.n}"
