"""GET /v1/files/search: a bot's passages ranked for a natural-language
query, each with the passages around it (`contextDepth`), the headings it
sits under (breadcrumbs), or merged per file (`consolidate`).

Two rankers propose passages: by words (files/selectors/search_lexical.py)
and by meaning (files/selectors/search_semantic.py, when semantic search is
on). Ranking fuses their orders by reciprocal rank (each passage scores
the sum of 1 / (RRF_K + its rank) over the rankers that found it), scaled so
that a passage first in every ranker scores 1: higher is better, and scores
compare across queries."""

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.db.models import Q

from bots.models import Bot
from files.models import HEADING_SUBTYPES, File, Passage, PassageSubtype
from files.selectors.files import files_live
from files.selectors.passage_places import places_condition
from files.selectors.search_lexical import passages_ranked_lexically
from files.selectors.search_semantic import semantic_ranking_start
from files.selectors.searched_files import SearchedFiles
from platform_site.foundation.tags import TagCondition

# Reciprocal rank fusion's constant (Cormack et al.'s 60): how far down a
# ranker's list still counts.
RRF_K = 60
# Passages each ranker proposes, at least: fusion needs more than the page.
CANDIDATES_MIN = 50

# A query with no word finds nothing (no ranking would mean anything).
_WORD = re.compile(r"\w")


@dataclass(frozen=True)
class SearchRequest:
    query: str
    tags: Sequence[TagCondition]
    context_depth: int
    limit: int
    consolidate: bool
    include_breadcrumb: bool
    with_context: bool


@dataclass(frozen=True)
class ContextPassage:
    text: str
    type: str
    """preceding, current, subsequent or breadcrumb"""
    id: str | None = None
    offset: int | None = None


@dataclass(frozen=True)
class Hit:
    """One passage of the answer: `passage` is the match (for a
    consolidated hit, the file's first match)."""

    passage: Passage
    file: File
    content: str
    score: float
    consolidated: bool = False
    context: list[ContextPassage] = field(default_factory=list)


def searchable_files(*, bot: Bot, tags: Sequence[TagCondition]) -> SearchedFiles:
    """The bot's live files whose tags pass `tags`."""
    files = files_live(File.objects.filter(bot=bot))
    for condition in tags:
        files = files.filter(condition.q())
    return SearchedFiles(files)


def fused(rankings: Sequence[Sequence[str]], limit: int) -> list[tuple[str, float]]:
    """Reciprocal rank fusion of `rankings` (ids, best first): the best
    `limit` ids with their scores, scaled to 1 for first everywhere."""
    scores: dict[str, float] = defaultdict(float)
    for ranking in rankings:
        for rank, passage_id in enumerate(ranking, start=1):
            scores[passage_id] += 1 / (RRF_K + rank)
    best = len(rankings) / (RRF_K + 1)
    order = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return [(passage_id, score / best) for passage_id, score in order[:limit]]


def files_search(*, bot: Bot, request: SearchRequest) -> list[Hit]:
    if not _WORD.search(request.query):
        return []
    files = searchable_files(bot=bot, tags=request.tags)
    candidates = max(request.limit, CANDIDATES_MIN)
    semantic = semantic_ranking_start(files=files, query=request.query, limit=candidates)
    lexical = passages_ranked_lexically(files=files, query=request.query, limit=candidates)
    rankings = [lexical] if semantic is None else [lexical, semantic.passage_ids()]
    ranked = fused(rankings, request.limit)
    if not ranked:
        return []
    passages = Passage.objects.select_related("file").in_bulk([pid for pid, _ in ranked])
    # A passage deleted between the two statements is left out.
    matches = [(passages[pid], score) for pid, score in ranked if pid in passages]
    if not matches:
        return []
    around = _neighbours([p for p, _ in matches], request.context_depth)
    headings = _headings([p for p, _ in matches]) if _wants_headings(request) else {}
    if request.consolidate:
        return _consolidated(matches, around, headings, request.context_depth)
    return [_hit(passage, score, around, headings, request) for passage, score in matches]


def _wants_headings(request: SearchRequest) -> bool:
    return request.consolidate or request.include_breadcrumb


def _neighbours(matches: Sequence[Passage], depth: int) -> dict[tuple[str, int], Passage]:
    """The passages within `depth` positions of each match, by (file, position)."""
    if depth == 0:
        return {(p.file_id, p.position): p for p in matches}
    places = sorted(
        {
            (passage.file_id, position)
            for passage in matches
            for position in range(passage.position - depth, passage.position + depth + 1)
        }
    )
    condition, params = places_condition(places)
    table = Passage._meta.db_table
    around = Passage.objects.raw(f"SELECT * FROM {table} WHERE {condition}", params)
    return {(p.file_id, p.position): p for p in around}


def _headings(matches: Sequence[Passage]) -> dict[str, list[Passage]]:
    """Each matched file's titles and subtitles up to its last match, in order."""
    last: dict[str, int] = {}
    for passage in matches:
        last[passage.file_id] = max(last.get(passage.file_id, -1), passage.position)
    window = Q()
    for file_id, position in last.items():
        window |= Q(file_id=file_id, position__lt=position)
    found: dict[str, list[Passage]] = defaultdict(list)
    headings = Passage.objects.filter(window, subtype__in=HEADING_SUBTYPES)
    for heading in headings.order_by("position"):
        found[heading.file_id].append(heading)
    return found


def breadcrumb_headings(headings: Iterable[Passage], position: int) -> list[Passage]:
    """The title a passage at `position` sits under, then the subtitle
    under that title it sits under (the nearest of each above it)."""
    title: Passage | None = None
    subtitle: Passage | None = None
    for heading in headings:
        if heading.position >= position:
            break
        if heading.subtype == PassageSubtype.TITLE:
            title, subtitle = heading, None
        else:
            subtitle = heading
    return [h for h in (title, subtitle) if h is not None]


def breadcrumb(headings: Iterable[Passage], position: int) -> str:
    """`Title > Subtitle` above a passage at `position`; empty when none."""
    return " > ".join(h.content for h in breadcrumb_headings(headings, position))


def _window(
    passage: Passage, around: dict[tuple[str, int], Passage], depth: int
) -> list[tuple[int, Passage]]:
    """(offset, passage) around `passage`, itself at 0, in position order."""
    return [
        (offset, neighbour)
        for offset in range(-depth, depth + 1)
        if (neighbour := around.get((passage.file_id, passage.position + offset))) is not None
    ]


def _hit(
    passage: Passage,
    score: float,
    around: dict[tuple[str, int], Passage],
    headings: dict[str, list[Passage]],
    request: SearchRequest,
) -> Hit:
    window = _window(passage, around, request.context_depth)
    parts = [p.content for _, p in window]
    crumbs = breadcrumb(headings.get(passage.file_id, ()), passage.position)
    if request.include_breadcrumb and crumbs:
        parts.insert(0, crumbs)
    context: list[ContextPassage] = []
    if request.with_context:
        context = [ContextPassage(text=crumbs, type="breadcrumb")] if crumbs else []
        context += [
            ContextPassage(text=p.content, type=_side(offset), id=p.id, offset=offset)
            for offset, p in window
        ]
    return Hit(
        passage=passage, file=passage.file, content="\n".join(parts), score=score, context=context
    )


def _side(offset: int) -> str:
    return "preceding" if offset < 0 else "subsequent" if offset > 0 else "current"


def _consolidated(
    matches: Sequence[tuple[Passage, float]],
    around: dict[tuple[str, int], Passage],
    headings: dict[str, list[Passage]],
    depth: int,
) -> list[Hit]:
    """One hit per file: its matches and their context in position order,
    each run under the headings it sits under, scored as its best match."""
    by_file: dict[str, list[tuple[Passage, float]]] = defaultdict(list)
    for passage, score in matches:
        by_file[passage.file_id].append((passage, score))
    hits = []
    for file_matches in by_file.values():
        first = min((p for p, _ in file_matches), key=lambda p: p.position)
        shown = sorted(
            {p.position: p for m, _ in file_matches for _, p in _window(m, around, depth)}.values(),
            key=lambda p: p.position,
        )
        parts: list[str] = []
        printed: set[int] = set()
        for passage in shown:
            above = breadcrumb_headings(headings.get(passage.file_id, ()), passage.position)
            for heading in [*above, passage]:
                if heading.position not in printed:
                    printed.add(heading.position)
                    parts.append(heading.content)
        hits.append(
            Hit(
                passage=first,
                file=first.file,
                content="\n".join(parts),
                score=max(score for _, score in file_matches),
                consolidated=True,
            )
        )
    return sorted(hits, key=lambda hit: -hit.score)
