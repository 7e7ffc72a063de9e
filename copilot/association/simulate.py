"""More training lives from an LLM acting as a life simulator, in the same JSON Lines format.

Meant for a capable endpoint (``COPILOT_OPENAI_BASE_URL`` / ``COPILOT_HF_TOKEN``): the bundled small model
does not follow this brief. Each person is one call; every returned line is parsed, validated and checked
so that no trigger shares a content word, name or number with its own statement (a trigger that does would
teach word matching, which the base encoder already does). Lines are written as soon as a person is done,
so an interrupted run keeps what it has.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from copilot.association.data import Life, parse_life, read_jsonl
from copilot.llm import ChatModel, NoJSONObject, extract_json_object

SIMULATOR_PROMPT = """\
You simulate the lives of invented people who talk to a personal AI assistant over many months. Their
conversations provide pairs (an old statement -> a later message) that teach a retrieval model to recall
the right old memory when a new message arrives whose wording has nothing in common with it.

For the person you are given:
- Invent them concretely and consistently: name, age, work, place, family, projects.
- Write 10 STATEMENTS they told the assistant at some point: first person, one or two sentences, specific
  (an event, a fact, a state, a plan, a preference or a value). For example: "My advisor told me the ACL
  camera-ready is due on the 14th and she wants to read it two days before."
- For each statement write 3 TRIGGERS: messages the same person sends days to months later, first person,
  natural chat tone, where a good assistant SHOULD remember the statement to answer well, yet the trigger
  does not mention, quote or paraphrase it. It shares no key nouns, names, numbers or rare words with the
  statement. The link is an association: a cause and its consequence, an old state that explains a new
  feeling, a goal that a new situation touches, a value that a new choice tests. Good triggers for the
  example: "Can you help me plan my week? I only have Monday and Tuesday free to write." or "I'm so
  nervous about sending my draft to Prof. Lee on Thursday." A bad one: "What was the ACL deadline again?"
  (too direct).
- Also write 1 DIRECT question per statement that plainly asks about it ("When is my camera-ready due?").
- Label each statement with a relation in {causal, state, goal, value} (about a quarter each) and the
  time_gap before the triggers, in words ("three days later", "about two months later").

Vary length, tone and topics; allow the odd typo; never use templates or repeat a sentence pattern.
English only; invent everything, no real private people.

Answer with exactly 10 lines of JSON Lines and nothing else, one statement per line, with exactly these keys:
{"person": "<id>", "statement": "...", "relation": "causal|state|goal|value", "time_gap": "...",
 "triggers": ["...", "...", "..."], "direct_question": "..."}"""

THEMES = (
    "a researcher early in their career",
    "a senior academic, industry scientist, clinician or librarian",
    "an everyday life outside academia",
    "someone who uses a research copilot daily (reading and writing habits)",
    "a life over a long stretch: recovery, grief or a new role",
    "an academic working in an under-represented country",
    "a year-long trajectory: statements in time order, later ones building on earlier ones",
    "values, principles and long-term goals (mostly value and goal statements)",
    "a casual chat style with typos",
    "health, family and work constraints behind everyday requests",
)

_STOPWORDS = frozenset("""
about above after again against also among because been before being below between both came come could
does doing done down during each even ever every from further gets getting going have having here itself
just keep like made make many more most much must myself need never next only other ought ourselves over
really said same should since some still such than that their theirs them themselves then there these
they thing things this those through time very want went were what when where which while will with
within without would your yours yourself into onto upon back well good know think last first week weeks
month months year years today told tell says under someone something anything anyone everyone
whether enough help give haven didn doesn isn wasn aren can't cannot
""".split())
_TOKEN = re.compile(r"\d[\d,.]*\d|\d|[a-z]+(?:'[a-z]+)?")


def content_words(text: str) -> set[str]:
    """Numbers, and words of four letters or more that are not function words (plural ``s`` stripped)."""
    words = set()
    for token in _TOKEN.findall(text.lower()):
        if token[0].isdigit():
            words.add(token.replace(",", ""))
            continue
        token = token.split("'")[0]
        token = token[:-1] if token.endswith("s") and len(token) > 4 else token
        if len(token) >= 4 and token not in _STOPWORDS:
            words.add(token)
    return words


def leaked_words(statement: str, trigger: str) -> set[str]:
    """Content words a trigger shares with its statement (empty for a usable trigger)."""
    return content_words(statement) & content_words(trigger)


def person_request(person_id: str, theme: str) -> str:
    return (f"Simulate one person. Their id is \"{person_id}\"; use it as the person value on every line. "
            f"Their life: {theme}.")


def parse_reply(reply: str, person_id: str) -> tuple[list[Life], Counter]:
    """Valid lives from one reply (person id forced), and why the other lines were rejected."""
    lives: list[Life] = []
    rejected: Counter = Counter()
    for line in reply.splitlines():
        if "{" not in line:
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            try:
                record = extract_json_object(line)
            except NoJSONObject:
                rejected["not json"] += 1
                continue
        if not isinstance(record, dict):
            rejected["not an object"] += 1
            continue
        record["person"] = person_id
        try:
            life = parse_life(record)
        except ValueError:
            rejected["invalid fields"] += 1
            continue
        if len(life.triggers) != 3:
            rejected["not 3 triggers"] += 1
        elif any(leaked_words(life.statement, t) for t in life.triggers):
            rejected["trigger shares words with its statement"] += 1
        else:
            lives.append(life)
    return lives[:10], rejected


def _existing_persons(path: Path) -> set[str]:
    return {str(r.get("person")) for r in read_jsonl(path)} if path.exists() else set()


def simulate_lives(llm: ChatModel, out: str | Path, n_persons: int, *, seed: int = 0, prefix: str = "sim",
                   themes: Sequence[str] = THEMES, max_tokens: int = 4000, temperature: float = 0.9,
                   progress: Callable[[str], None] | None = None) -> dict:
    """Ask ``llm`` for ``n_persons`` lives and append the valid lines to ``out``; returns the counts."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    taken = _existing_persons(out)
    rng = random.Random(seed)
    stats = {"persons_requested": n_persons, "persons_written": 0, "lines_written": 0, "rejected": Counter()}
    number = 0
    with open(out, "a", encoding="utf-8") as handle:
        for _ in range(n_persons):
            number += 1
            while f"{prefix}{seed}_{number:03d}" in taken:
                number += 1
            person_id = f"{prefix}{seed}_{number:03d}"
            messages = [{"role": "system", "content": SIMULATOR_PROMPT},
                        {"role": "user", "content": person_request(person_id, rng.choice(list(themes)))}]
            lives, rejected = parse_reply(llm.chat(messages, max_tokens=max_tokens, temperature=temperature),
                                          person_id)
            stats["rejected"].update(rejected)
            for life in lives:
                handle.write(life.as_json() + "\n")
            handle.flush()
            stats["lines_written"] += len(lives)
            stats["persons_written"] += bool(lives)
            if progress:
                progress(f"{person_id}: {len(lives)} lines, rejected {dict(rejected)}")
    stats["rejected"] = dict(stats["rejected"])
    return stats
