"""A ~1,000-token haystack with one planted KEY=###### line, asked for through the chat template."""
from __future__ import annotations

FILLER = [
    "The grass is green and the sky is blue.",
    "The sun rises in the east and sets in the west.",
    "Rivers flow from the mountains down to the sea.",
    "Bakers start work early to have bread ready by morning.",
    "A library keeps books on many shelves, sorted by subject.",
    "Trains leave the station on time when the weather is calm.",
    "Farmers plant seeds in spring and harvest crops in autumn.",
    "The town market opens every Saturday near the old bridge.",
    "Children walk to school along the quiet tree-lined street.",
    "The museum shows paintings, statues and ancient maps.",
]
POSITIONS = (0.1, 0.5, 0.9)          # where the key line sits, as a fraction of the haystack
CODES = ("482917", "305846", "719263")


def haystack(code: str, position: float, sentences: int = 80) -> str:
    lines = [FILLER[i % len(FILLER)] for i in range(sentences)]
    lines.insert(int(position * sentences), f"Remember this: KEY={code}.")
    return " ".join(lines)


def needle_messages(code: str, position: float) -> list[dict]:
    return [{"role": "user", "content": haystack(code, position) +
             "\n\nWhat is the value of KEY? Answer with the six digits only."}]
