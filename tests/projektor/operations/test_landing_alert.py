"""The stuck landing queue alert of docs/alerts.yml, as ``promtool test rules`` runs it
(invariant 21 (the default branch is always green)): it fires for a project whose queue
held entries for 30 minutes while none landed or was rejected, and not for a queue that
moves, nor for an empty one."""

import subprocess
from pathlib import Path

import yaml

from tests.projektor.operations.test_prometheus import DOCS, PROMTOOL, need

ALERT = "ProjektorLandingQueueStuck"


def depth(project: str, values: str) -> dict[str, str]:
    labels = f'instance="a:8000",workspace="acme",project="{project}"'
    return {"series": f"projektor_landing_queue_depth{{{labels}}}", "values": values}


def landed(project: str, values: str, outcome: str = "landed") -> dict[str, str]:
    labels = f'instance="a:8000",workspace="acme",project="{project}",outcome="{outcome}"'
    return {"series": f"projektor_landings_total{{{labels}}}", "values": values}


CASES = {
    "rule_files": [str(DOCS / "alerts.yml")],
    "evaluation_interval": "1m",
    "tests": [
        {
            "interval": "1m",
            "input_series": [
                # core: two entries wait all along; the last one landed at minute 10.
                depth("core", "2x70"),
                landed("core", "0+1x10 10x60"),
                landed("core", "0x70", outcome="check_failed"),
                # web: entries wait all along, and one lands or is rejected every minute.
                depth("web", "3x70"),
                landed("web", "0+1x35 35x35"),
                landed("web", "0x35 0+1x35", outcome="conflict"),
                # ops: an empty queue that never moves.
                depth("ops", "0x70"),
                landed("ops", "0x70"),
                # docs: an entry queued at minute 30 into a queue idle for long.
                depth("docs", "0x30 1x40"),
                landed("docs", "0x70"),
            ],
            "alert_rule_test": [
                {"eval_time": "38m", "alertname": ALERT, "exp_alerts": []},
                {
                    "eval_time": "50m",
                    "alertname": ALERT,
                    "exp_alerts": [
                        {
                            "exp_labels": {
                                "severity": "warning",
                                "workspace": "acme",
                                "project": "core",
                            },
                            "exp_annotations": {
                                "summary": "The landing queue of core (acme) has not moved "
                                "for 30 minutes",
                                "description": "2 entries wait and nothing landed or was "
                                "rejected in 30 minutes: is a tester running (projektor land "
                                "--loop), or does the check hang? The health page shows who "
                                "tests the batch.",
                            },
                        }
                    ],
                },
                {
                    "eval_time": "66m",
                    "alertname": ALERT,
                    "exp_alerts": [
                        {
                            "exp_labels": {
                                "severity": "warning",
                                "workspace": "acme",
                                "project": p,
                            },
                            "exp_annotations": {
                                "summary": f"The landing queue of {p} (acme) has not moved "
                                "for 30 minutes",
                                "description": f"{n} entries wait and nothing landed or was "
                                "rejected in 30 minutes: is a tester running (projektor land "
                                "--loop), or does the check hang? The health page shows who "
                                "tests the batch.",
                            },
                        }
                        for p, n in (("core", 2), ("docs", 1))
                    ],
                },
            ],
        }
    ],
}


def test_the_stuck_landing_queue_alert_fires_after_thirty_minutes(tmp_path: Path) -> None:
    need(PROMTOOL)
    cases = tmp_path / "landing_test.yml"
    cases.write_text(yaml.safe_dump(CASES))
    checked = subprocess.run(
        [PROMTOOL, "test", "rules", str(cases)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
