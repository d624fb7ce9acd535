"""`--tools recorded` hands back a recorded result in the key order the tool returned it.

A cassette's YAML sorts mapping keys, so a dict result read back from it is in another order
than the model saw; sent back as is, the next request's tool message would differ from the
recorded one and replay would report drift the code never caused."""

from __future__ import annotations

from pathlib import Path

from agentbench.cli import main
from agentbench.replay.cassette import Cassette
from agentbench.replay.tool_policy import ReplayTools, ToolPolicies

ROOT = Path(__file__).resolve().parent.parent
CASSETTE = ROOT / "replays" / "customer_service" / "refund-eligible.yaml"


def test_the_shipped_cassette_keeps_the_result_sorted_and_the_message_in_tool_order() -> None:
    cassette = Cassette.load(CASSETTE)
    (status,) = [r for r in cassette.info["tool_results"] if r["tool"] == "order_status"]
    assert list(status["result"]["data"]) == sorted(status["result"]["data"])
    tools = ReplayTools(
        ToolPolicies.parse("recorded"),
        cassette.info["tool_results"],
        (i.request for i in cassette.interactions),
    )
    ordered = tools._order.of(status["result"]["data"])
    assert ordered == status["result"]["data"]
    assert list(ordered) == ["order_id", "total", "ordered", "status", "age_days"]
    assert tools._order.of("plain text") == "plain text"
    assert tools._order.of({"never": "sent"}) == {"never": "sent"}


def test_replaying_with_recorded_tools_shows_no_drift(tmp_path: Path, capsys) -> None:
    code = main(["replay", str(CASSETTE), "--tools", "recorded", "--db", str(tmp_path / "t.db")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "request drift" not in out and "verdict: unchanged" in out
