"""The statement that reads a page of a file's passages as JSON the database writes.

A page of 200 passages is about 170 KB of JSON. Read into 200 model instances,
turned into dicts and encoded again, it cost the view eight times its query
(bench/passages_page.py). Here one statement finds the file and selects and
encodes the page: the view receives the passages array as one text value and
sends it on as it is (files.presenters.passages_page_body wraps it).

Two definitions stay in Python and tests/test_passages_json.py holds the
statements to them, value for value: files.presenters.passage_json (a
passage's JSON) and files.selectors.files.file_get (which file an id or key names).
"""

from dataclasses import dataclass
from datetime import datetime

from django.db import connection

# Both statements read the bot's live file named by `file_id` (null when the
# reference cannot be an id) or `key`, then size + 1 of its passages after
# position `after`: the extra row only tells that a next page exists. They
# answer the file's id and passages_version (nulls when there is no such
# file), the first `size` passages as a JSON array in position order (`[]`
# when there are none), how many passages were read, and the position of the
# page's last one. pageNumber is left out when null, sourceUrl when empty.
_FILE_AND_ROWS = """
WITH file AS (
    SELECT id, passages_version
    FROM files_file
    WHERE bot_id = %(bot_id)s
        AND (expires_at IS NULL OR expires_at > %(now)s)
        AND (id = %(file_id)s OR key = %(key)s)
    -- An id wins over a key that happens to spell another file's id.
    ORDER BY CASE WHEN id = %(file_id)s THEN 0 ELSE 1 END
    LIMIT 1
), page AS (
    SELECT rows.*, row_number() OVER (ORDER BY rows.position) AS row_number
    FROM (
        SELECT id, position, content, type, subtype, page_number, source_url
        FROM files_passage
        WHERE file_id = (SELECT id FROM file) AND position > %(after)s
        ORDER BY position
        LIMIT %(size)s + 1
    ) AS rows
    ORDER BY rows.position
)
"""

_POSTGRESQL = (
    _FILE_AND_ROWS
    + """
SELECT
    (SELECT id FROM file),
    (SELECT passages_version FROM file),
    coalesce(
        json_agg(json_build_object(
            'id', id,
            'content', content,
            'meta', json_strip_nulls(json_build_object(
                'type', type,
                'subtype', subtype,
                'position', position,
                'pageNumber', page_number,
                'sourceUrl', nullif(source_url, '')
            ))
        ) ORDER BY position) FILTER (WHERE row_number <= %(size)s),
        '[]'
    )::text,
    count(*),
    max(position) FILTER (WHERE row_number <= %(size)s)
FROM page
"""
)

# SQLite before 3.44 has no ORDER BY inside an aggregate: json_group_array
# takes the rows in the order `page` gives them. json_patch drops the members
# whose value is null (a JSON merge patch deletes them).
_SQLITE = (
    _FILE_AND_ROWS
    + """
SELECT
    (SELECT id FROM file),
    (SELECT passages_version FROM file),
    coalesce(
        json_group_array(json_object(
            'id', id,
            'content', content,
            'meta', json_patch(
                json_object('type', type, 'subtype', subtype, 'position', position),
                json_object('pageNumber', page_number, 'sourceUrl', nullif(source_url, ''))
            )
        )) FILTER (WHERE row_number <= %(size)s),
        '[]'
    ),
    count(*),
    max(position) FILTER (WHERE row_number <= %(size)s)
FROM page
"""
)


@dataclass(frozen=True)
class FilePassagesJSON:
    file_id: str | None
    """None: the bot has no live file of that id or key."""
    passages_version: int
    passages: str
    """The page's passages: a JSON array, as the database wrote it."""
    next_after: int | None
    """The position the next page starts after; None on the last page."""


def file_passages_json_select(
    *, bot_id: str, file_id: str | None, key: str, now: datetime, after: int | None, size: int
) -> FilePassagesJSON:
    """Up to `size` passages after position `after` (None: from the first) of
    the bot's file of id `file_id` or else of key `key`, live at `now`."""
    statement = _POSTGRESQL if connection.vendor == "postgresql" else _SQLITE
    params = {
        "bot_id": bot_id,
        "file_id": file_id,
        "key": key,
        "now": connection.ops.adapt_datetimefield_value(now),
        "after": -1 if after is None else after,
        "size": size,
    }
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        found_id, passages_version, passages, read, last = cursor.fetchone()
    return FilePassagesJSON(
        file_id=found_id,
        passages_version=passages_version or 0,
        passages=passages,
        next_after=last if read > size else None,
    )
