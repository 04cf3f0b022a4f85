"""GEMINI_API_KEYS read as the server reads it, case by case from the table the server's tests read too
(test/cases/gemini-api-keys.json): track_jobs(keys=…) finds the label of its client's key the same way, spaces
between pairs included, so a job is tracked with the credential that polls it."""

import json
from pathlib import Path

import pytest
from genai_standins import Client

from ratchet_client import track_jobs
from ratchet_client._tracking import api_keys_of

CASES = json.loads((Path(__file__).resolve().parents[3] / "test" / "cases" / "gemini-api-keys.json").read_text())["cases"]


def test_the_table_holds_both_kinds_of_case():
    assert len([c for c in CASES if c["keys"] is None]) > 5
    assert len([c for c in CASES if c["keys"] is not None]) > 5


@pytest.mark.parametrize("case", CASES, ids=[repr(c["value"]) for c in CASES])
def test_reads_each_value_as_the_server_does(case):
    keys = api_keys_of(case["value"])
    assert (None if keys is None else [list(pair) for pair in keys]) == case["keys"]


class Recorder:
    def __init__(self) -> None:
        self.tracked = []

    def track(self, name, **options):
        self.tracked.append((name, options))
        return {"operation": {"name": name}, "created": True}


@pytest.mark.parametrize("keys", ["team-a=key-a team-b=key-b", "team-a=key-a,\nteam-b=key-b", "team-b=key-b"])
def test_tracks_with_the_label_of_the_clients_own_key(keys):
    ai = Client(2, api_key="key-b")
    recorder = Recorder()
    track_jobs(ai, recorder, keys=keys).batches.create(model="gemini-2.5-flash", src=[])
    assert recorder.tracked[0][1].get("credential") == "team-b"


def test_tracks_with_no_label_when_the_keys_are_not_pairs_the_server_takes():
    ai = Client(2, api_key="key-b")
    recorder = Recorder()
    track_jobs(ai, recorder, keys="team-b=key-b,team-b=key-c").batches.create(model="gemini-2.5-flash", src=[])
    assert recorder.tracked[0][1].get("credential") is None
