from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Block:
    """One structural unit of a document, in document order, before chunking.

    `subtype` is a `files.models.PassageSubtype` value. Readers keep the text
    close to the source; chunking normalises whitespace by subtype. Lists and
    tables are rendered one item or row per line ("- item", "1. item",
    "cell | cell") so that chunking can split them at line boundaries.
    """

    subtype: str
    text: str
    page_number: int | None = None
