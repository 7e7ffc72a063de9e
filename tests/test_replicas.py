"""Several writers, one database: thoughts written at once for one user are neither lost nor stored twice (on both
backends), a thought job is claimed by one worker at a time and taken over when its lease runs out, and two app
replicas in processes of their own share one PostgreSQL: what one adds, writes or is told, the other sees, and a
replica killed after answering has its thought written by the other."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from gradio_client import Client

from copilot.config import Settings
from copilot.thoughts import ThoughtMemory
from copilot.types import RetrievedItem
from tests.conftest import ROOT, all_rows, clean_env, free_port
from tests.library_support import HashEmbedder
from tests.scripted_llm import ScriptedLLM

# Two groups of paraphrases: within a group far above the merge threshold, between groups far below it.
GROUPS = {
    "corpus": "Researchers can mine the full text of many academic papers with the large S2ORC corpus {}.",
    "graph": "The Semantic Scholar literature graph links papers authors and entities through citations {}.",
}
WRITERS = 16


def test_racing_writers_of_one_user_neither_lose_nor_duplicate_a_thought(open_store) -> None:  # noqa: ANN001
    """20 threads, each with a store of its own (as 20 processes: their own connections and, on SQLite, their own
    vector indices), write at the same moment: 16 paraphrases of two thoughts for ada, 4 of one for bob. Ada gets
    two thoughts, each with the support of all eight writes that went into it; bob's stay his own."""
    texts = [("ada", group, template.format(f"variant{i}")) for i in range(WRITERS // 2)
             for group, template in GROUPS.items()]
    texts += [("bob", "corpus", GROUPS["corpus"].format(f"variant{i}")) for i in range(4)]
    stores = [open_store() for _ in texts]
    # The writes race on the store; their answer's grounding (meaningless with a hashing embedder) is not tested here.
    settings = Settings(min_confidence=0.3, relevance_weight=0.0, association=False, thought_needs_grounding=False)
    embedder = HashEmbedder()
    start = threading.Barrier(len(texts))
    outcomes: list = [None] * len(texts)
    items = [RetrievedItem("chunk", 10_000, "a source", 0.5)]

    def write(n: int) -> None:
        user, _, text = texts[n]
        memory = ThoughtMemory(stores[n], embedder, ScriptedLLM(thoughts=[(f"thought: {text}\nanswered: yes",
                                                                              0.9)]), settings)
        start.wait()
        outcomes[n] = memory.write(user_id=user, question="q", answer="an answer [1]", items=items)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(o.outcome for o in outcomes) == ["added"] * 3 + ["merged"] * (len(texts) - 3), outcomes
    rows = all_rows(stores[0], "thoughts")
    supports = sorted((r["user_id"], r["support"]) for r in rows)
    assert supports == [("ada", WRITERS // 2), ("ada", WRITERS // 2), ("bob", 4)], [r["text"] for r in rows]
    ids: dict[tuple[str, str], set[int]] = {}
    for outcome, (user, group, _) in zip(outcomes, texts, strict=True):
        ids.setdefault((user, group), set()).add(outcome.thought_id)
    assert all(len(found) == 1 for found in ids.values()) and len(set.union(*ids.values())) == 3
    for store in stores:
        assert store.check_consistency()["thoughts"]


def test_a_thought_job_has_one_worker_at_a_time_and_outlives_it(store) -> None:  # noqa: ANN001
    query_id = store.queries.add("ada", "q", "a [1]", [{"kind": "chunk", "id": 1, "depth": 0}], {"answer_ms": 1.0},
                                 public=True, claim="replica-a")
    assert store.queries.claim_next("replica-b", lease_s=60) is None, "replica-a's lease still runs"
    assert store.queries.claim(query_id, "replica-b", lease_s=60) is None
    assert store.queries.claim(query_id, "replica-a", lease_s=60).query_id == query_id, "its own claim"
    assert store.queries.renew([query_id], "replica-b") == 0 and store.queries.renew([query_id], "replica-a") == 1
    job = store.queries.claim_next("replica-b", lease_s=0)  # replica-a's lease has run out
    assert job is not None and job.query_id == query_id and job.public and job.question == "q"
    assert job.retrieved == [{"kind": "chunk", "id": 1, "depth": 0}] and job.timings == {"answer_ms": 1.0}
    assert store.queries.claim_next("replica-c", lease_s=60) is None, "claimed again, by replica-b"
    assert store.queries.record_outcome(query_id, thought_id=None, outcome="dropped", reason="x", timings={},
                                        llm_calls=2)
    assert not store.queries.record_outcome(query_id, thought_id=7, outcome="added", reason="", timings={},
                                            llm_calls=2), "a job is completed once"
    assert store.queries.get(query_id).thought_outcome == "dropped"
    assert store.queries.claim_next("replica-c", lease_s=0) is None


# ----- two app replicas on one PostgreSQL ---------------------------------------------------------------------


class Replica:
    """``tests/replica_app.py`` in a process of its own, on a free port."""

    def __init__(self, url: str, data_dir: Path, *, hold_thoughts: Path | None = None) -> None:
        self.port = free_port()
        self.log = data_dir.with_suffix(".log")
        command = [sys.executable, "-m", "tests.replica_app", str(self.port), url, str(data_dir)]
        if hold_thoughts is not None:
            command += ["--hold-thoughts", str(hold_thoughts)]
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(command, cwd=ROOT, env=clean_env(), stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}/"

    def wait_ready(self, timeout_s: float = 120) -> Client:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the replica exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url, timeout=5) as response:
                    if response.status == 200:
                        return Client(self.url, verbose=False)
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the replica did not answer at {self.url}:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.5)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def replicas(pg_url: str, tmp_path: Path):  # noqa: ANN201 - yields a factory of replicas
    started: list[Replica] = []

    def start(name: str, **kwargs) -> Replica:  # noqa: ANN003
        replica = Replica(pg_url, tmp_path / name, **kwargs)
        started.append(replica)
        return replica

    yield start
    for replica in started:
        replica.kill()


def _rows(table: dict | list) -> list[list]:
    return table["data"] if isinstance(table, dict) else table


def _chat(client: Client, question: str) -> tuple[list[list], int]:
    _, _, retrieved, query_id, _ = client.predict(question, [], [], False, False, api_name="/chat")
    return _rows(retrieved), int(query_id)


def _confidence(client: Client, thought_id: int) -> float:
    rows = _rows(client.predict("", "newest", api_name="/list_thoughts"))
    return next(r[2] for r in rows if r[0] == thought_id)


@pytest.mark.slow
def test_two_replicas_share_papers_thoughts_and_feedback(replicas) -> None:  # noqa: ANN001
    a, b = replicas("a"), replicas("b")
    client_a, client_b = a.wait_ready(), b.wait_ready()
    notice, _ = client_a.predict(["2301.00001"], api_name="/add_arxiv")
    assert "2301.00001: added" in notice, notice
    assert "2301.00001" in [r[0] for r in _rows(client_b.predict(api_name="/list_papers"))], "added on A, seen on B"

    question = "How is the literature graph of Semantic Scholar built?"
    _, query_id = _chat(client_a, question)
    status = client_a.predict(query_id, api_name="/thought_status")
    assert "added" in status, status
    (thought_id,) = [r[0] for r in _rows(client_a.predict("", "newest", api_name="/list_thoughts"))]
    retrieved, _ = _chat(client_b, question)
    assert ["thought", thought_id] in [r[1:3] for r in retrieved], "written on A, retrieved on B"

    before = _confidence(client_a, thought_id)
    down = client_b.predict(query_id, api_name="/feedback_down")
    assert f"thought #{thought_id}" in down, down
    assert _confidence(client_a, thought_id) < before, "feedback on B moves the confidence A shows"


@pytest.mark.slow
def test_a_replica_killed_after_answering_has_its_thought_written_by_another(replicas,  # noqa: ANN001
                                                                              tmp_path: Path) -> None:
    marker = tmp_path / "thinking"
    a = replicas("a", hold_thoughts=marker)
    client_a = a.wait_ready()
    client_a.predict(["2301.00001"], api_name="/add_arxiv")
    _, query_id = _chat(client_a, "Which entities does the Semantic Scholar literature graph hold?")
    deadline = time.monotonic() + 30
    while not marker.exists():  # answered, and the thought call has begun: kill it there
        assert time.monotonic() < deadline, "the thought call never started"
        time.sleep(0.1)
    a.kill()

    b = replicas("b")
    client_b = b.wait_ready()
    status = client_b.predict(query_id, api_name="/thought_status")
    deadline = time.monotonic() + 60
    while "added" not in status and time.monotonic() < deadline:
        time.sleep(0.5)
        status = client_b.predict(query_id, api_name="/thought_status")
    assert "added" in status, status
    thoughts = _rows(client_b.predict("", "newest", api_name="/list_thoughts"))
    assert len(thoughts) == 1 and "literature graph" in thoughts[0][-1] and thoughts[0][3] == 1, thoughts
