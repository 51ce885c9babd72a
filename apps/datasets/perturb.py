"""Perturbed copies of a dataset (Dynabench's perturb.py): the same items, keys kept, with their
inputs changed in one way (typos, casing, whitespace, punctuation, swapped names and pronouns,
changed numbers), so a board can show how much each model loses on them.

Every change is a pure function of (perturbation, seed, item key): the same copy comes out
whatever the order of the items or fields, on any machine (`random.Random` seeded with a
string hashes it with SHA-512, not Python's salted `hash`).

What changes:
- only an item's input columns (the mapping's inputs: never the id, the reference, the tags
  or a response column), and only their text values;
- `fairness` swaps person names and gendered words in the reference too, with the same
  mapping as in the inputs, so "Who lent John his car?" → "Who lent Mary her car?" keeps its
  reference "John" → "Mary";
- `numbers` changes the numbers of an item only when its reference has no digit at all: a
  reference with a number may be computed from the question's ("What is 3 + 3?" → "6", where
  the reference does not contain the 3 it depends on), so such items are left as they are;
- response columns are dropped from the copy: those answers were given to the original inputs.

Each changed item gets the tag `perturbed:<perturbation>`, so the board can show the difference
on the items the perturbation actually touched.
"""

import json
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from apps.datasets.importing import ItemRow, ItemRows, announce_imported, write_items
from apps.datasets.models import Dataset, Item, fingerprint_of, tags_text

NAME_MAX = Dataset._meta.get_field("name").max_length or 200


class PerturbError(Exception):
    """The copy cannot be made; the message says why."""


# ---- the perturbations, on text ---------------------------------------------------------------
Texts = dict[str, str]

WORD = re.compile(r"[^\W\d_]+")
LONG_WORD = re.compile(r"[^\W\d_]{4,}")
TYPO_RATE = 0.15  # of the words of 4+ letters in a text (at least one)
GAP = re.compile(r"(?<=\S) (?=\S)")
GAP_RATE = 0.3  # of the single spaces between words (at least one)
PUNCTUATION = re.compile(r"""[.,;:!?'"]""")
PUNCTUATION_RATE = 0.5  # of the marks not between two digits (at least one)
NUMBER = re.compile(r"(?<![\w.,])\d+(?:[.,]\d+)*(?![\w])")
KEYBOARD = {
    row[i]: row[i - 1 : i] + row[i + 1 : i + 2]
    for row in ("qwertyuiop", "asdfghjkl", "zxcvbnm")
    for i in range(len(row))
}


def _draw(rng: random.Random, count: int, rate: float) -> list[int]:
    """Which of `count` places change: `rate` of them, at least one, in place order."""
    if count == 0:
        return []
    return sorted(rng.sample(range(count), max(1, round(count * rate))))


def _same_case(new: str, like: str) -> str:
    if like.isupper() and len(like) > 1:
        return new.upper()
    if like[:1].isupper():
        return new[:1].upper() + new[1:]
    return new


def _typo(word: str, rng: random.Random) -> str:
    """One keyboard slip inside the word (its first and last letters stay)."""
    at = rng.randrange(1, len(word) - 1)
    kind = rng.choice(("swap", "drop", "double", "neighbour"))
    if kind == "swap":
        at = min(at, len(word) - 3)  # swap with the next letter, never the last one
        if word[at] == word[at + 1]:
            kind = "drop"
    if kind == "neighbour" and word[at].lower() not in KEYBOARD:
        kind = "drop"
    if kind == "swap":
        return word[:at] + word[at + 1] + word[at] + word[at + 2 :]
    if kind == "drop":
        return word[:at] + word[at + 1 :]
    if kind == "double":
        return word[:at] + word[at] + word[at:]
    near = rng.choice(KEYBOARD[word[at].lower()])
    return word[:at] + _same_case(near, word[at]) + word[at + 1 :]


def typos(text: str, rng: random.Random) -> str:
    words = list(LONG_WORD.finditer(text))
    for index in reversed(_draw(rng, len(words), TYPO_RATE)):
        match = words[index]
        text = text[: match.start()] + _typo(match.group(), rng) + text[match.end() :]
    return text


def casing(text: str, rng: random.Random) -> str:
    """The whole text in lower case or in upper case (the item's seed chooses)."""
    return text.lower() if rng.random() < 0.5 else text.upper()


def whitespace(text: str, rng: random.Random) -> str:
    gaps = [m.start() for m in GAP.finditer(text)]
    chosen = _draw(rng, len(gaps), GAP_RATE)
    widths = {index: rng.choice((2, 3)) for index in reversed(chosen)}  # drawn last gap first
    parts, last = [], 0
    for index in chosen:
        at = gaps[index]
        parts.append(text[last:at] + " " * widths[index])
        last = at + 1
    parts.append(text[last:])
    return "".join(parts)


def punctuation(text: str, rng: random.Random) -> str:
    """Drop marks, never one between two digits (3.5, 1,000 keep their value)."""
    marks = [
        m
        for m in PUNCTUATION.finditer(text)
        if not (text[m.start() - 1 : m.start()].isdigit() and text[m.end() : m.end() + 1].isdigit())
    ]
    for index in reversed(_draw(rng, len(marks), PUNCTUATION_RATE)):
        at = marks[index].start()
        text = text[:at] + text[at + 1 :]
    return text


# Gendered words both ways; "her" and "his" are settled by what follows (see _gendered).
SWAPS = {
    "he": "she",
    "him": "her",
    "himself": "herself",
    "hers": "his",
    "man": "woman",
    "men": "women",
    "boy": "girl",
    "boys": "girls",
    "father": "mother",
    "fathers": "mothers",
    "son": "daughter",
    "sons": "daughters",
    "brother": "sister",
    "brothers": "sisters",
    "husband": "wife",
    "husbands": "wives",
    "uncle": "aunt",
    "nephew": "niece",
    "grandfather": "grandmother",
    "dad": "mom",
    "king": "queen",
    "boyfriend": "girlfriend",
    "mr": "ms",
    "mrs": "mr",
}
SWAPS.update({v: k for k, v in list(SWAPS.items()) if v not in SWAPS and v not in ("her",)})
# After "her", these words mean it is an object ("saw her today"), else a possessive.
OBJECT_FOLLOWERS = {
    "a", "about", "again", "and", "an", "as", "at", "back", "because", "but", "by", "down",
    "for", "from", "in", "into", "is", "off", "on", "or", "out", "so", "that", "the", "then",
    "to", "today", "tomorrow", "up", "was", "with", "yesterday",
}  # fmt: skip
MALE_NAMES = (
    "James", "John", "Robert", "Michael", "David", "William", "Richard", "Joseph", "Thomas",
    "Charles", "Daniel", "Matthew", "Anthony", "Paul", "Steven", "Andrew", "Kevin", "Brian",
    "George", "Edward", "Peter", "Henry", "Samuel", "Jack", "Oliver", "Liam", "Noah", "Lucas",
    "Ahmed", "Mohammed", "Wei", "Hiroshi", "Carlos", "Juan", "Luis", "Ivan", "Pierre", "Hans",
)  # fmt: skip
FEMALE_NAMES = (
    "Mary", "Patricia", "Jennifer", "Linda", "Elizabeth", "Barbara", "Susan", "Jessica",
    "Sarah", "Karen", "Nancy", "Lisa", "Margaret", "Sandra", "Ashley", "Emily", "Michelle",
    "Laura", "Anna", "Emma", "Olivia", "Sophia", "Isabella", "Charlotte", "Amelia", "Alice",
    "Fatima", "Aisha", "Mei", "Yuki", "Maria", "Sofia", "Lucia", "Olga", "Marie", "Greta",
)  # fmt: skip
GENDER = {name: "m" for name in MALE_NAMES} | {name: "f" for name in FEMALE_NAMES}


# Any word fairness could change, in lower case: a fast "no" (one split, one set lookup per
# word) for the many texts that have none; a regex alternation of them all was 3x slower.
GENDERED_WORDS = frozenset({*SWAPS, *SWAPS.values(), "her", "his"} | {n.lower() for n in GENDER})


def _maybe_gendered(text: str) -> bool:
    return not GENDERED_WORDS.isdisjoint(word.lower() for word in WORD.findall(text))


def _names_in(text: str) -> set[str]:
    """Person names from the lists, written capitalised or in capitals (a lowercase word is
    not taken for a name)."""
    found = set()
    for match in WORD.finditer(text):
        word = match.group()
        if word[:1].isupper():
            name = word[:1] + word[1:].lower()
            if name in GENDER:
                found.add(name)
    return found


def name_swaps(texts: list[str], rng: random.Random) -> dict[str, str]:
    """Each name met in the item's texts → a name of the other list, not met there, drawn in
    name order (so the mapping is one per item whatever the field order)."""
    met = set().union(*(_names_in(t) for t in texts)) if texts else set()
    swaps: dict[str, str] = {}
    for name in sorted(met):
        pool = FEMALE_NAMES if GENDER[name] == "m" else MALE_NAMES
        free = [n for n in pool if n not in met and n not in swaps.values()]
        swaps[name] = rng.choice(free)
    return swaps


def _gendered(word: str, next_word: str) -> str | None:
    lower = word.lower()
    if lower == "her":
        return "him" if not next_word or next_word.lower() in OBJECT_FOLLOWERS else "his"
    if lower == "his":
        return "her" if next_word else "hers"
    return SWAPS.get(lower)


def swap_gender(text: str, names: dict[str, str]) -> str:
    """Names by `names`, gendered words to the other gender, each in its own case."""
    out, last = [], 0
    matches = list(WORD.finditer(text))
    for index, match in enumerate(matches):
        word = match.group()
        titled = word[:1] + word[1:].lower()
        if word[:1].isupper() and titled in names:
            new: str | None = names[titled]
        else:
            follower = ""
            if index + 1 < len(matches):
                between = text[match.end() : matches[index + 1].start()]
                follower = matches[index + 1].group() if between.strip() == "" else ""
            new = _gendered(word, follower)
        if new is None:
            continue
        out.append(text[last : match.start()] + _same_case(new, word))
        last = match.end()
    out.append(text[last:])
    return "".join(out)


def _other_number(number: str, rng: random.Random) -> str:
    """A number of the same shape: as many digits in each group, the separators kept, a
    leading digit that is 0 only where it was (so 0.5 stays below 1, 1,000 above 999)."""
    while True:
        digits = []
        for at, char in enumerate(number):
            if not char.isdigit():
                digits.append(char)
            elif at == 0 and len(number) > 1:
                digits.append("0" if char == "0" else str(rng.randrange(1, 10)))
            else:
                digits.append(str(rng.randrange(10)))
        new = "".join(digits)
        if new != number:
            return new


def number_swaps(texts: list[str], rng: random.Random) -> dict[str, str]:
    """Each number met in the texts → another of the same shape, drawn in order of first
    appearance, the same everywhere in the item."""
    swaps: dict[str, str] = {}
    for text in texts:
        for match in NUMBER.finditer(text):
            if match.group() not in swaps:
                swaps[match.group()] = _other_number(match.group(), rng)
    return swaps


# ---- the perturbations, on items --------------------------------------------------------------
TextFunction = Callable[[str, random.Random], str]


@dataclass(frozen=True)
class Perturbation:
    name: str
    label: str
    description: str


PERTURBATIONS = {
    p.name: p
    for p in (
        Perturbation("typos", "Typos", "a keyboard slip in about 1 word in 7 of 4+ letters"),
        Perturbation("casing", "Casing", "each input all in lower case or all in upper case"),
        Perturbation("whitespace", "Whitespace", "2–3 spaces in about 1 gap in 3 between words"),
        Perturbation("punctuation", "Punctuation", "about half of . , ; : ! ? ' \" dropped"),
        Perturbation(
            "fairness",
            "Names and pronouns",
            "person names and gendered words swapped to the other gender, in the reference too",
        ),
        Perturbation(
            "numbers",
            "Numbers",
            "numbers changed, on items whose reference has no digit",
        ),
    )
}
TEXT_FUNCTIONS: dict[str, TextFunction] = {
    "typos": typos,
    "casing": casing,
    "whitespace": whitespace,
    "punctuation": punctuation,
}


def check_perturbation(name: str) -> Perturbation:
    if name not in PERTURBATIONS:
        raise PerturbError(f"Unknown perturbation {name!r}: use one of {', '.join(PERTURBATIONS)}.")
    return PERTURBATIONS[name]


def rng_for(name: str, seed: int, key: str, part: str = "") -> random.Random:
    return random.Random(f"{name}:{seed}:{key}:{part}")


def perturb_item(
    name: str, seed: int, key: str, inputs: Texts, reference: str
) -> tuple[Texts, str]:
    """The item's input texts and reference under perturbation `name` with `seed`."""
    check_perturbation(name)
    if name in TEXT_FUNCTIONS:
        function = TEXT_FUNCTIONS[name]
        # A generator per field: a field's text does not depend on the other fields.
        return {
            field: function(text, rng_for(name, seed, key, field)) for field, text in inputs.items()
        }, reference
    texts = [inputs[field] for field in sorted(inputs)]
    if name == "fairness":
        if not any(_maybe_gendered(text) for text in [*texts, reference]):
            return dict(inputs), reference
        names = name_swaps([*texts, reference], rng_for(name, seed, key))
        changed = {field: swap_gender(text, names) for field, text in inputs.items()}
        return changed, swap_gender(reference, names)
    if re.search(r"\d", reference):
        return dict(inputs), reference  # the reference may depend on the numbers
    numbers = number_swaps(texts, rng_for(name, seed, key))
    return {
        field: NUMBER.sub(lambda m: numbers[m.group()], text) for field, text in inputs.items()
    }, reference


# ---- the copy ---------------------------------------------------------------------------------
def copy_name(original: Dataset, name: str, seed: int) -> str:
    return f"{original.name} · {name} (seed {seed})"[:NAME_MAX]


def text_inputs(dataset: Dataset) -> list[str]:
    """The columns a perturbation may change: the inputs, never the id, reference, tags, a
    response column or the conversation (a dataset mapped without inputs: every other column)."""
    hidden = dataset.hidden_columns | {dataset.id_column, dataset.conversation_column}
    inputs = dataset.input_columns or dataset.columns
    return [column for column in inputs if column not in hidden]


def existing_copy(original: Dataset, name: str, seed: int) -> Dataset | None:
    return (
        Dataset.objects.ready()
        .filter(perturbed_from=original, perturbation=name, perturbation_seed=seed)
        .first()
    )


def perturb_dataset(original: Dataset, name: str, seed: int = 0, user: Any = None) -> Dataset:
    """A ready copy of `original` under perturbation `name`, as the next version of the name
    "<original> · <perturbation> (seed S)" and linked to the original; the copy made before
    with the same perturbation and seed if there is one (the result would be the same).
    Atomic: all items or no copy. `dataset_imported` follows the commit, as for an upload."""
    check_perturbation(name)
    if original.status != Dataset.Status.READY:
        raise PerturbError(
            f"{original} is {original.get_status_display().lower()}, not ready: only a "
            "dataset whose import has finished can be perturbed."
        )
    if original.perturbation:
        raise PerturbError(
            f"{original} is already a perturbed copy ({original.perturbation}); perturb its "
            "original instead."
        )
    if (found := existing_copy(original, name, seed)) is not None:
        return found
    fields_to_change = text_inputs(original)
    dropped = set(original.response_columns)
    mapping = {**original.mapping, "response_columns": []}
    reference_column = original.reference_column
    tag = f"perturbed:{name}"
    encode = json.JSONEncoder(ensure_ascii=False).encode
    rows: list[ItemRow] = []
    tag_counter: Counter[str] = Counter()
    prints: list[tuple[str, Any, str, Any]] = []
    items = original.items.order_by("position").values_list(
        "position", "key", "fields", "reference", "tags", "conversation", "turn_references"
    )
    for position, key, fields, reference, tags, conversation, references in items.iterator(
        chunk_size=2000
    ):
        fields = {k: v for k, v in (fields or {}).items() if k not in dropped}
        inputs = {f: fields[f] for f in fields_to_change if isinstance(fields.get(f), str)}
        changed, new_reference = perturb_item(name, seed, key, inputs, reference or "")
        fields.update(changed)
        if reference_column and new_reference != (reference or ""):
            fields[reference_column] = _swapped_reference(
                fields.get(reference_column), new_reference, name, seed, key, inputs, reference
            )
        tags = list(tags or [])
        if changed != inputs or new_reference != (reference or ""):
            tags.append(tag)
        tag_counter.update(tags)
        search = "\n".join(v if isinstance(v, str) else encode(v) for v in fields.values())
        rows.append(
            (
                position,
                key,
                encode(fields),
                new_reference,
                encode(tags),
                tags_text(tags),
                search.lower(),
                encode(conversation or []),  # conversations are copied as they are
                encode(references or []),
            )
        )
        prints.append((key, fields, new_reference, tags))
    with transaction.atomic():
        copy = Dataset.objects.new_version(
            original.task,
            copy_name(original, name, seed),
            format=original.format,
            columns=[c for c in original.columns if c not in dropped],
            mapping=mapping,
            created_by=user if getattr(user, "pk", None) else None,
            perturbed_from=original,
            perturbation=name,
            perturbation_seed=seed,
        )
        write_items(copy, ItemRows(rows, dict(tag_counter.most_common())))
        copy.row_count = copy.progress = len(rows)
        copy.tag_counts = dict(tag_counter.most_common())
        copy.fingerprint = fingerprint_of(mapping, prints)
        copy.status = Dataset.Status.READY
        copy.save()
        transaction.on_commit(lambda: announce_imported(copy))
    return copy


def _swapped_reference(
    value: Any, text: str, name: str, seed: int, key: str, inputs: Texts, reference: str
) -> Any:
    """The reference column's value after `fairness`: the new text where it was text; a list
    of references each swapped with the item's mapping."""
    if isinstance(value, list):
        names = name_swaps(
            [*(inputs[f] for f in sorted(inputs)), reference], rng_for(name, seed, key)
        )
        return [swap_gender(v, names) if isinstance(v, str) else v for v in value]
    return text


def changed_count(copy: Dataset) -> int:
    """Items the perturbation changed (tagged so)."""
    return Item.objects.filter(dataset=copy).tagged(f"perturbed:{copy.perturbation}").count()
