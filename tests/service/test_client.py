"""`greta_stream.client` and `greta-stream queries ...` against the real service.

A query registered from the command line (by file, source as a shorthand)
is listed, read by name, stopped, started and deleted; its rows through the
client are `evaluate`'s rows. Errors come back as one line with the query's
position, not a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from service_helpers import API_KEY, FLUSH, Q1, REPO, Service, normalized, sample_events, wait_for, write_file

from greta_stream import evaluate
from greta_stream.client import ServiceClient, ServiceError

pytestmark = [pytest.mark.service, pytest.mark.spark]


def cli(service: Service, *args: str, key: str | None = API_KEY) -> subprocess.CompletedProcess[str]:
    env_key = ["--api-key", key] if key else []
    cmd = [sys.executable, "-m", "greta_stream", "queries", *args, "--url", service.url, *env_key]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)


def test_cli_and_client_drive_a_query_from_registration_to_deletion(service: Service) -> None:
    events = sample_events()
    src = service.root / "in-client"
    write_file(src, "events.jsonl", events)
    write_file(src, "flush.jsonl", [FLUSH])

    added = cli(service, "add", "--name", "client-q1", "--query", str(REPO / "configs" / "q1_stock.greta"),
                "--source", f"jsonl:{src}")
    assert added.returncode == 0, added.stderr
    name, query_id, status = added.stdout.split()
    assert (name, status) == ("client-q1", "running")

    client = ServiceClient(service.url, api_key=API_KEY)
    want = evaluate(Q1, events)
    info = client.wait("client-q1", rows=len(want), timeout_s=240)
    assert info["id"] == query_id
    assert normalized(list(client.results("client-q1", page_rows=37))) == normalized(want)  # pages of 37

    plan = cli(service, "plan")  # the query by its name beside its id
    assert plan.returncode == 0, plan.stderr
    (stream,) = [s for s in json.loads(plan.stdout)["streams"] if query_id in s["queries"]]
    assert [q["name"] for q in stream["by_query"] if q["id"] == query_id] == ["client-q1"]
    assert f"client-q1 [{query_id}]" in stream["text"]

    listed = cli(service, "list")
    assert listed.returncode == 0 and any(line.split()[:3] == ["client-q1", query_id, "running"]
                                          for line in listed.stdout.splitlines()), listed.stdout
    lines = cli(service, "results", "client-q1").stdout.splitlines()
    assert len(lines) == len(want)

    out = service.root / "out-client-q1"
    assert client.update("client-q1", sinks=[{"format": "jsonl", "path": str(out)}])["sinks"][0]["path"] == str(out)
    assert cli(service, "stop", "client-q1").stdout.split()[2] == "stopped"
    assert client.query(query_id)["status"] == "stopped"
    assert cli(service, "start", query_id).stdout.split()[2] == "running"

    refused = cli(service, "delete", "client-q1", key=None)  # changes need the key
    assert refused.returncode == 1 and refused.stderr.startswith("error: 401"), refused.stderr
    assert cli(service, "delete", "client-q1").returncode == 0
    with pytest.raises(ServiceError, match="no query"):
        client.query("client-q1")


def test_a_bad_query_is_one_line_with_its_position(service: Service) -> None:
    bad = cli(service, "add", "--name", "client-bad", "--query", "RETURN COUNT(*) PATTERN Stock S+ WITHIN",
              "--source", f"jsonl:{service.root / 'in-client-bad'}")
    assert bad.returncode == 1
    assert "Traceback" not in bad.stderr and "line 1, column" in bad.stderr, bad.stderr
    assert "client-bad" not in cli(service, "list").stdout


@pytest.mark.usefixtures("subprocesses")
def test_an_unreachable_service_is_one_line() -> None:
    gone = subprocess.run([sys.executable, "-m", "greta_stream", "queries", "list", "--url", "http://127.0.0.1:9"],
                          capture_output=True, text=True, timeout=60)
    assert gone.returncode == 1 and gone.stderr.strip().startswith("error: cannot reach the service"), gone.stderr


def test_a_mistake_in_one_part_shows_in_the_list_for_a_complete_folder(service: Service) -> None:
    """A query joins the stream of a folder that is already read to its end (no new input will come):
    the service reads the records already there, and `queries list` (API and command line) names the
    negated type that matches nothing, with the close one; the good query beside it names nothing."""
    src = service.root / "in-complete"
    cluster = [json.loads(line) for line in (REPO / "samples" / "cluster" / "events.jsonl").read_text().splitlines()]
    write_file(src, "events.jsonl", cluster[:600])
    good = ("RETURN mapper, COUNT(*) PATTERN SEQ(Start S, NOT End X, Measurement M+) WHERE [mapper, job] "
            "GROUP-BY mapper WITHIN 1 minute")
    client = ServiceClient(service.url, api_key=API_KEY)
    assert cli(service, "add", "--name", "complete-good", "--query", good, "--source", f"jsonl:{src}").returncode == 0
    wait_for(lambda: client.query("complete-good")["progress"]["input_rows"] >= 600, "the folder read", service)
    typo = good.replace("NOT End X", "NOT end X")
    added = cli(service, "add", "--name", "complete-typo", "--query", typo, "--source", f"jsonl:{src}")
    assert added.returncode == 0, added.stderr
    said = "type 'end' of X (under NOT) matches no event; did you mean 'End'?"
    assert said in client.query("complete-typo")["progress"]["problem"]
    assert client.query("complete-good")["progress"]["problem"] is None
    listed = cli(service, "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("complete-typo"))
    assert lines[at + 1].startswith(f"  problem: {said}")
    assert not lines[next(i for i, line in enumerate(lines) if line.startswith("complete-good")) + 1].startswith(
        "  problem")
    for name in ("complete-good", "complete-typo"):
        assert cli(service, "delete", name).returncode == 0
