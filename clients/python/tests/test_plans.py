"""The plans both clients run, driven here by hand: what a snapshot keeps, and how wait_for falls back to reads
with pauses where the server offers no long poll. No server: each answer is scripted."""

import pytest

from ratchet_client import RatchetError
from ratchet_client import _plans as plans


def record(name, version, state, source="webhook"):
    return {
        "name": name,
        "kind": "batch",
        "version": version,
        "state": state,
        "previousState": None,
        "stateChanged": True,
        "providerState": None,
        "updateTime": None,
        "result": None,
        "source": source,
        "eventId": None,
        "createdAt": "2026-12-01T10:00:00.000Z",
        "recordedAt": "2026-12-01T10:00:00.000Z",
    }


def drive(plan, answers):
    """Runs ``plan``, answering its requests from ``answers`` (path prefix -> answer); returns its steps and result."""
    steps, reply = [], None
    try:
        while True:
            step = plan.send(reply)
            steps.append(step)
            reply = None
            if step[0] == "request":
                path = step[2]
                key = next(k for k in answers if path.startswith(k))
                queue = answers[key]
                reply = (queue.pop(0), {}) if isinstance(queue, list) else (queue, {})
            if step[0] == "item" and len([s for s in steps if s[0] == "item"]) >= answers.get("__items__", 99):
                return steps, None
    except StopIteration as done:
        return steps, done.value


def test_a_snapshot_keeps_each_operation_at_its_latest_version_in_the_state_asked_for():
    # a's version 2 committed while the records were read, which already show its version 3.
    change = dict(record("batches/a", 2, "RUNNING"), cursor="c2", writeKind="state-change", committedAt="t")
    answers = {
        "/changes?after=c2": [{"changes": [], "cursor": "c2"}],
        "/changes?after=c1&limit": [{"changes": [change], "cursor": "c2"}],
        "/changes?after=c2&limit": [{"changes": [], "cursor": "c2"}],
        "/changes": [{"changes": [], "cursor": "c1"}],
        "/operations": {"operations": [record("batches/a", 3, "SUCCEEDED"), record("batches/b", 1, "RUNNING")]},
        "__items__": 1,
    }
    steps, _ = drive(plans.watch({"state": "SUCCEEDED"}, None), answers)
    items = [s[1] for s in steps if s[0] == "item"]
    # a at its latest version, 3, at the snapshot's cursor; b is not SUCCEEDED.
    assert [(i["name"], i["version"], i["cursor"], i["snapshot"]) for i in items] == [("batches/a", 3, "c2", True)]


def test_a_snapshot_by_provider_lists_that_providers_jobs_and_keeps_each_write_as_the_feed_names_it():
    outcome = dict(record("openai/batches/a", 3, "SUCCEEDED", source="poll"), kind="openai-batch", provider="openai", resultWrite=True)
    gemini = dict(record("batches/b", 1, "RUNNING"), provider="gemini")
    answers = {
        "/changes?after=c1&limit": [{"changes": [], "cursor": "c1"}],
        "/changes": [{"changes": [], "cursor": "c1"}],
        # A server that ignored provider= would answer both: the snapshot keeps the provider's alone.
        "/operations": {"operations": [outcome, gemini]},
        "__items__": 1,
    }
    steps, _ = drive(plans.watch({"provider": "openai"}, None), answers)
    listing = next(s[2] for s in steps if s[0] == "request" and s[2].startswith("/operations"))
    assert "provider=openai" in listing
    assert "provider=openai" in next(s[2] for s in steps if s[0] == "request" and s[2].startswith("/changes?after=c1"))
    items = [s[1] for s in steps if s[0] == "item"]
    assert [(i["name"], i["provider"], i["writeKind"]) for i in items] == [("openai/batches/a", "openai", "result")]


def test_wait_for_reads_with_pauses_where_the_server_holds_no_read():
    answers = {"/operations/batches/x": [record("batches/x", 1, "RUNNING"), record("batches/x", 1, "RUNNING"), record("batches/x", 2, "SUCCEEDED")]}
    seen = []
    steps, done = drive(plans.wait_for("batches/x", "terminal", None, lambda op: seen.append(op["version"])), answers)
    assert done["state"] == "SUCCEEDED" and seen == [1, 2]
    # The first read asks for a long poll; answered without Ratchet-Long-Poll, the next are plain reads, 1 s then 2 s apart.
    assert [s[0] for s in steps] == ["request", "sleep", "request", "sleep", "request"]
    assert [s[1] for s in steps if s[0] == "sleep"] == [1.0, 2.0]
    assert "wait=" in steps[0][2] and "wait=" not in steps[2][2]


def test_wait_for_waits_for_the_outcome_of_a_job_a_bare_webhook_ended():
    pending = dict(record("openai/batches/b", 1, "SUCCEEDED"), resultPending=True, polling={"nextPollAt": "t", "note": None})
    outcome = dict(record("openai/batches/b", 2, "SUCCEEDED", source="poll"), result={"requestCounts": {"total": 2}})
    steps, done = drive(plans.wait_for("openai/batches/b", "terminal", None, None), {"/operations/openai/batches/b": [pending, outcome]})
    assert done["version"] == 2 and done["result"] == {"requestCounts": {"total": 2}}
    # Asked for SUCCEEDED, it waits the same way; a pending end whose polling stopped is answered as it is.
    stopped = dict(pending, polling={"nextPollAt": None, "note": "terminal-conflict"})
    _, done = drive(plans.wait_for("openai/batches/b", "SUCCEEDED", None, None), {"/operations/openai/batches/b": [stopped]})
    assert done["version"] == 1


def test_wait_for_ends_at_once_naming_the_provider_that_no_longer_knows_the_job():
    gone = dict(record("openai/batches/g", 1, "RUNNING"), provider="openai")
    gone["polling"] = {"nextPollAt": None, "failedPolls": 0, "notFoundPolls": 3, "note": "not-found"}
    with pytest.raises(RatchetError) as stopped:
        drive(plans.wait_for("openai/batches/g", "terminal", None, None), {"/operations/openai/batches/g": [gone]})
    assert stopped.value.code == "not-found"
    assert "openai/batches/g: openai no longer knows it (404 3 times in a row)" in str(stopped.value)


def test_wait_for_refuses_an_until_that_cannot_come():
    with pytest.raises(RatchetError) as wrong:
        next(plans.wait_for("batches/x", ["SUCCEEDED", "terminal"], None, None))
    assert wrong.value.code == "invalid-argument"
