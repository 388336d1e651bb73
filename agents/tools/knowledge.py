"""The bundled travel knowledge base and its keyword search.

The documents live in ``data/travel_kb.json``: short bilingual notes (English and Chinese)
on sights, food, seasons and transport for the cities in :mod:`agents.tools.places`.
Search is plain keyword scoring, no embeddings and no network: Chinese text is cut into
character bigrams, English into lower-cased words with trivial plural stripping, and a
document scores the IDF-weighted overlap with the query, title and tags counting more than
the body. A city named in the query comes first: its documents rank above every other
city's, and among themselves by their keywords.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources

from agents.tools.places import PLACES, find_places

DATA_FILE = "data/travel_kb.json"
TITLE_WEIGHT = 3.0
TAG_WEIGHT = 3.0
BODY_WEIGHT = 1.0
# Added to every document of a city the query names, so that each is a hit even when no
# keyword matches ("Suzhou" alone); they rank first whatever the boost (search_knowledge).
CITY_BOOST = 10.0
SNIPPET_CHARS = 360
MAX_LIMIT = 10

INVALID_LIMIT = "limit must be between 1 and {max}, got {limit}."

_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[a-z0-9]+")
# Words and bigrams of questions, too common to say anything about a destination.
_STOPWORD_TEXT = """
a an and any are as at be by can cities city do does for from go good how i in is it me
my near nice of on or our recommend should some suggest that the there this to us visit
we what where which who with would you your
城市 什么 有什 怎么 怎样 哪里 哪些 哪个 一个 一下 一些 可以 我们 我想 想去 请问 推荐 适合
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_NAME_ZH = {place.name: place.name_zh for place in PLACES}


@dataclass(frozen=True)
class Document:
    """One knowledge-base entry: bilingual ``title``/``text``/``tags`` keyed by "en"/"zh"."""

    id: str
    city: str
    topic: str
    title: dict[str, str]
    text: dict[str, str]
    tags: dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class _Index:
    documents: tuple[Document, ...]
    weights: tuple[dict[str, float], ...]  # per document: token -> field weight
    idf: dict[str, float]


def contains_cjk(text: str) -> bool:
    """Return True if ``text`` contains any CJK ideograph."""
    return _CJK_RUN.search(text) is not None


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us")):
        return word[:-1]
    return word


def tokenize(text: str) -> set[str]:
    """Return the search tokens of ``text``: CJK character bigrams plus English word stems.

    A CJK run of one character yields that character; longer runs yield their overlapping
    bigrams ("江南园林" -> 江南, 南园, 园林). English words are lower-cased and stripped of
    a plural "s"; one-letter words and stopwords (both languages) are dropped.
    """
    tokens: set[str] = set()
    for run in _CJK_RUN.findall(text):
        if len(run) == 1:
            tokens.add(run)
        tokens.update(run[i : i + 2] for i in range(len(run) - 1))
    for word in _WORD.findall(_CJK_RUN.sub(" ", text.lower())):
        if len(word) > 1:
            tokens.add(_stem(word))
    return tokens - _STOPWORDS


def _tokens_of(parts: Iterable[str]) -> set[str]:
    tokens: set[str] = set()
    for part in parts:
        tokens |= tokenize(part)
    return tokens


def _document_weights(doc: Document) -> dict[str, float]:
    weights: dict[str, float] = {}
    fields = (
        (doc.text.values(), BODY_WEIGHT),
        ([tag for tags in doc.tags.values() for tag in tags], TAG_WEIGHT),
        (doc.title.values(), TITLE_WEIGHT),
    )
    for parts, weight in fields:
        for token in _tokens_of(parts):
            weights[token] = max(weights.get(token, 0.0), weight)
    return weights


@functools.cache
def load_documents() -> tuple[Document, ...]:
    """Return the bundled documents, read once from ``data/travel_kb.json``.

    Raises ValueError if a document names a city missing from the gazetteer.
    """
    raw = json.loads(resources.files(__package__).joinpath(DATA_FILE).read_text("utf-8"))
    documents = tuple(
        Document(
            id=item["id"],
            city=item["city"],
            topic=item["topic"],
            title=dict(item["title"]),
            text=dict(item["text"]),
            tags={lang: tuple(tags) for lang, tags in item["tags"].items()},
        )
        for item in raw["documents"]
    )
    unknown = {doc.city for doc in documents} - set(_NAME_ZH)
    if unknown:
        raise ValueError(f"Knowledge base names cities missing from places.py: {unknown}")
    return documents


@functools.cache
def _index() -> _Index:
    documents = load_documents()
    weights = tuple(_document_weights(doc) for doc in documents)
    frequency: dict[str, int] = {}
    for doc_weights in weights:
        for token in doc_weights:
            frequency[token] = frequency.get(token, 0) + 1
    total = len(documents)
    idf = {token: math.log(1 + total / count) for token, count in frequency.items()}
    return _Index(documents=documents, weights=weights, idf=idf)


def _snippet(text: str) -> str:
    if len(text) <= SNIPPET_CHARS:
        return text
    cut = text[:SNIPPET_CHARS]
    # Cut English at a word boundary; Chinese has none to respect.
    if " " in cut and not contains_cjk(cut):
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:") + "…"


def search_knowledge(query: str, limit: int = 3) -> list[dict]:
    """Return up to ``limit`` knowledge-base hits for ``query``, best first.

    Each hit is ``{"id", "city", "city_zh", "topic", "title", "snippet", "score"}``;
    ``city`` is the canonical English name, ``title`` and ``snippet`` are in the query's
    language (Chinese when the query contains CJK characters, else English) and ``score``
    is rounded to two decimals. Documents that match nothing are left out, so the list may
    be empty. Raises ValueError if ``limit`` is not between 1 and ``MAX_LIMIT``.
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(INVALID_LIMIT.format(max=MAX_LIMIT, limit=limit))
    index = _index()
    named = find_places(query)
    named_cities = {place.name for place in named}
    # The boost stands for the city; its name must not score again, unevenly, as a word.
    query_tokens = tokenize(query) - _tokens_of(
        part for place in named for part in (place.name, place.name_zh, *place.aliases)
    )
    lang = "zh" if contains_cjk(query) else "en"

    # (another city's, score, position): a city the query names first, however many of
    # its words another city's notes share ("Plan 2 days in Suzhou": West Lake's "day
    # trip" and "plan" outscored Suzhou's boost).
    scored: list[tuple[bool, float, int]] = []
    for position, (doc, weights) in enumerate(zip(index.documents, index.weights, strict=True)):
        score = sum(weights[t] * index.idf[t] for t in query_tokens if t in weights)
        if doc.city in named_cities:
            score += CITY_BOOST
        if score > 0:
            scored.append((doc.city not in named_cities, score, position))
    scored.sort(key=lambda hit: (hit[0], -hit[1], hit[2]))

    hits = []
    for _, score, position in scored[:limit]:
        doc = index.documents[position]
        hits.append(
            {
                "id": doc.id,
                "city": doc.city,
                "city_zh": _NAME_ZH[doc.city],
                "topic": doc.topic,
                "title": doc.title[lang],
                "snippet": _snippet(doc.text[lang]),
                "score": round(score, 2),
            }
        )
    return hits
