from dataclasses import dataclass

from files.models import PassageSubtype, PassageType


@dataclass(frozen=True)
class PassageData:
    content: str
    subtype: str = PassageSubtype.PARAGRAPH
    type: str = PassageType.CHUNK
    page_number: int | None = None
    source_url: str = ""
    # None: the passage's place in the sequence it comes in.
    position: int | None = None
