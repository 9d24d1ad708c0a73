"""The rows of a run's last attempt go with the run's end on the dashboard (one
scheduler call fewer); a run without an announced end still publishes them."""

from __future__ import annotations

from daskhpc.runtime import Job, run_job
from daskhpc.testing import toy_program, toy_row


def _prog(first_unit):
    return toy_program(2, 3, length=10, first_unit=first_unit)


def _topics(client, monkeypatch) -> list:
    """The dashboard topics the client publishes, in order."""
    seen = []
    orig = client.run_on_scheduler

    def call(fn, *args, **kwargs):
        if getattr(fn, "__name__", "") == "_store":
            seen.append((args[0], args[1]))
        return orig(fn, *args, **kwargs)

    monkeypatch.setattr(client, "run_on_scheduler", call)
    return seen


def test_the_last_rows_go_with_the_end(client2, monkeypatch):
    job = Job("toy", 2, 3, row=toy_row, fingerprint={}, program=_prog, statics=[10] * 2,
              exchange="direct")
    seen = _topics(client2, monkeypatch)
    out = run_job(client2, job, progress_bar=False)
    topics = [t for t, _ in seen]
    assert "history" not in topics and topics[-1] == "end"
    assert [r["unit"] for r in seen[-1][1]["rows"]] == [r["unit"] for r in out.history]
    seen.clear()
    out = run_job(client2, job, progress_bar=False, announce=False)
    published = [r["unit"] for t, d in seen if t == "history" for r in d["rows"]]
    assert "end" not in [t for t, _ in seen] and published == [0, 1, 2]
