"""The stalled-agents alert of docs/alerts.yml, as ``promtool test rules`` runs it: it
fires after 15 minutes of a stalled agent, per workspace, and not while none is."""

import subprocess
from pathlib import Path

import yaml

from tests.projektor.operations.test_prometheus import DOCS, PROMTOOL, need

CASES = {
    "rule_files": [str(DOCS / "alerts.yml")],
    "evaluation_interval": "1m",
    "tests": [
        {
            "interval": "1m",
            "input_series": [
                {"series": 'projektor_stalled_sessions{workspace="acme"}', "values": "1x30"},
                {"series": 'projektor_stalled_sessions{workspace="globex"}', "values": "0x30"},
            ],
            "alert_rule_test": [
                {"eval_time": "10m", "alertname": "ProjektorAgentsStalled", "exp_alerts": []},
                {
                    "eval_time": "20m",
                    "alertname": "ProjektorAgentsStalled",
                    "exp_alerts": [
                        {
                            "exp_labels": {"severity": "warning", "workspace": "acme"},
                            "exp_annotations": {
                                "summary": "1 stalled agent(s) in workspace acme for 15 "
                                "minutes (see its health page)"
                            },
                        }
                    ],
                },
            ],
        }
    ],
}


def test_the_stalled_agents_alert_fires_after_fifteen_minutes(tmp_path: Path) -> None:
    need(PROMTOOL)
    cases = tmp_path / "stalled_test.yml"
    cases.write_text(yaml.safe_dump(CASES))
    checked = subprocess.run(
        [PROMTOOL, "test", "rules", str(cases)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
