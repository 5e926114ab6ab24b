"""The `deliveries` extension (a consumer's own callbacks: GET /jobs/{job_id}/callbacks,
GET /callbacks?state=dead, POST /callbacks/redrive), checked when the producer advertises it."""

from __future__ import annotations

from jobstream_client.transport import segment
from jobstream_conformance.session import Job, Session


def deliveries(session: Session, main: Job | None) -> None:
    """X5: the routes answer for the caller's own jobs and dead letters, never another's."""
    extensions = (session.capabilities or {}).get("extensions")
    if not isinstance(extensions, dict) or not isinstance(extensions.get("deliveries"), dict):
        session.skip("the producer does not advertise extensions.deliveries in capabilities", "X5")
        return
    with session.item("X5") as check:
        if main is None:
            check.skip("no job of this run was admitted")
        path = f"/jobs/{segment(main.job_id)}/callbacks"
        view = check.status(session.a.send("GET", path), 200)
        check.expect(view.get("job_id") == main.job_id, f"answered job {view.get('job_id')}")
        check.expect(isinstance(view.get("callbacks"), list), "no callbacks list")
        dead = check.status(session.a.send("GET", "/callbacks", query={"state": "dead"}), 200)
        check.expect(isinstance(dead.get("callbacks"), list), "no dead callbacks list")
        foreign = [c for c in dead["callbacks"] if c.get("job_id") in _others(session)]
        check.expect(not foreign, "A's dead letters list B's callbacks")
        body = {"jobid": main.job_id}  # misspelt: must not redrive everything
        check.error(session.a.send("POST", "/callbacks/redrive", body=body), 400)
        notes = ["a job's callbacks and the dead list answer; a misspelt redrive is a 400"]
        if session.b is not None:
            check.error(session.b.send("GET", path), 404)
            redrive = {"job_id": main.job_id}
            check.error(session.b.send("POST", "/callbacks/redrive", body=redrive), 404)
            notes.append("B's reads and redrive of A's job → 404")
        check.note("; ".join(notes))


def _others(session: Session) -> set[str]:
    return {job.job_id for job in session.jobs.values() if job.name.startswith("b-")}
