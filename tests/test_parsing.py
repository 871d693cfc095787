import logging
import random

import pytest
from fpdf import FPDF

from files.parsing import SUPPORTED_CONTENT_TYPES, UnreadableDocument, extract_passages
from files.passage_data import PassageData
from tests.documents import (
    encrypted_pdf,
    garbage_pdf,
    make_html,
    make_markdown,
    make_pdf,
    truncated_pdf,
)

WORDS = (
    "index passage document retrieval answer question bot platform chunk sentence "
    "paragraph the a of to and in is for on with supercalifragilistic x"
).split()


def parse(
    data: bytes | str, content_type: str, *, max_length: int = 5000, source_url: str = ""
) -> list[PassageData]:
    raw = data.encode() if isinstance(data, str) else data
    return extract_passages(
        raw, content_type=content_type, max_length=max_length, source_url=source_url
    )


def summary(passages: list[PassageData]) -> list[tuple[str, str, int | None]]:
    return [(passage.subtype, passage.content, passage.page_number) for passage in passages]


def unreadable_reason(data: bytes, content_type: str) -> str:
    with pytest.raises(UnreadableDocument) as caught:
        extract_passages(data, content_type=content_type, max_length=1000)
    reason = str(caught.value)
    assert "Error" not in reason and "Traceback" not in reason
    return reason


def sentences(count: int, seed: int = 1) -> str:
    """Prose of `count` sentences of 3 to 24 words, deterministic."""
    rng = random.Random(seed)
    return " ".join(
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 24))).capitalize() + "."
        for _ in range(count)
    )


def assert_bounded(passages: list[PassageData], max_length: int) -> None:
    assert passages
    for passage in passages:
        assert passage.content
        assert passage.content == passage.content.strip()
        assert len(passage.content) <= max_length


def words_of(passages: list[PassageData]) -> list[str]:
    return [word for passage in passages for word in passage.content.split()]


# Plain text


def test_plain_text_paragraphs_are_separated_by_blank_lines_and_collapsed():
    text = (
        "First paragraph\nwraps   onto a second line.\n\n"
        "  Second\tparagraph.  \n \n\n\nThird paragraph,\r\nwith CRLF.\r\n\r\n"
        "# Not a heading in plain text\n"
    )

    passages = parse(text, "text/plain", max_length=45)

    assert summary(passages) == [
        ("paragraph", "First paragraph wraps onto a second line.", None),
        ("paragraph", "Second paragraph.", None),
        ("paragraph", "Third paragraph, with CRLF.", None),
        ("paragraph", "# Not a heading in plain text", None),
    ]


def test_short_paragraphs_are_merged_while_the_passage_fits():
    paragraphs = [f"Paragraph number {n:02} is a short one." for n in range(7)]
    # Exactly three paragraphs and their two separators fit.
    max_length = 3 * len(paragraphs[0]) + 2 * len("\n\n")

    passages = parse("\n\n".join(paragraphs), "text/plain", max_length=max_length)

    assert summary(passages) == [
        ("paragraph", "\n\n".join(paragraphs[0:3]), None),
        ("paragraph", "\n\n".join(paragraphs[3:6]), None),
        ("paragraph", paragraphs[6], None),
    ]


def test_paragraphs_are_not_merged_with_other_subtypes():
    markdown = "One.\n\nTwo.\n\n- item\n\nThree.\n\n## Heading\n\nFour.\n"

    assert summary(parse(markdown, "text/markdown")) == [
        ("paragraph", "One.\n\nTwo.", None),
        ("list", "- item", None),
        ("paragraph", "Three.", None),
        ("subtitle", "Heading", None),
        ("paragraph", "Four.", None),
    ]


def test_two_megabytes_of_text_parse_into_bounded_passages():
    paragraphs = [sentences(6, seed=n) for n in range(2500)]
    text = "\n\n".join(paragraphs)
    while len(text) < 2_000_000:
        text += "\n\n" + text
    text = text[:2_000_000]

    passages = parse(text, "text/plain", max_length=1000)

    assert_bounded(passages, 1000)
    assert words_of(passages) == text.split()


# Chunk bounds


@pytest.mark.parametrize("max_length", [100, 5000])
@pytest.mark.parametrize(
    ("content_type", "wrap"),
    [
        ("text/plain", lambda text: text),
        ("text/markdown", lambda text: f"# Heading\n\n{text}\n"),
        ("text/html", lambda text: f"<h1>Heading</h1><p>{text}</p>"),
    ],
)
def test_a_long_paragraph_is_split_within_bounds_without_splitting_words(
    content_type, wrap, max_length
):
    paragraph = sentences(400)
    assert len(paragraph) > 20_000

    passages = parse(wrap(paragraph), content_type, max_length=max_length)

    assert_bounded(passages, max_length)
    body = [passage for passage in passages if passage.subtype == "paragraph"]
    assert words_of(body) == paragraph.split()
    assert len(body) >= len(paragraph) // max_length
    if max_length == 5000:
        # Sentences are shorter than half the window: every cut is at a sentence end.
        assert all(passage.content.endswith(".") for passage in body)


def test_a_long_pdf_paragraph_is_split_within_bounds_on_its_pages():
    paragraph = sentences(120)

    passages = parse(make_pdf([[("paragraph", paragraph)]]), "application/pdf", max_length=100)

    assert_bounded(passages, 100)
    assert words_of(passages) == paragraph.split()
    assert all(passage.page_number in (1, 2) for passage in passages)


def test_a_token_longer_than_the_limit_is_cut_into_pieces_of_the_limit():
    token = "x" * 250

    passages = parse(f"before {token} after", "text/plain", max_length=100)

    assert [passage.content for passage in passages] == [
        "before",
        "x" * 100,
        "x" * 100,
        "x" * 50 + " after",
    ]


def test_a_long_list_is_split_at_item_boundaries():
    items = [f"item {n} " + " ".join(WORDS[: n % 7 + 2]) for n in range(40)]
    markdown = "\n".join(f"- {item}" for item in items) + "\n"

    passages = parse(markdown, "text/markdown", max_length=100)

    assert_bounded(passages, 100)
    assert {passage.subtype for passage in passages} == {"list"}
    lines = [line for passage in passages for line in passage.content.split("\n")]
    assert lines == [f"- {item}" for item in items]
    assert len(passages) > 1


def test_a_list_item_longer_than_the_limit_is_split_by_words():
    long_item = sentences(10)
    passages = parse(f"1. short\n2. {long_item}\n3. last\n", "text/markdown", max_length=100)

    assert_bounded(passages, 100)
    assert passages[0].content == "1. short"
    assert words_of(passages) == ["1.", "short", "2.", *long_item.split(), "3.", "last"]


def test_a_long_table_is_split_at_row_boundaries():
    rows = [(f"row {n}", f"value {n * 7}", " ".join(WORDS[: n % 5 + 1])) for n in range(30)]
    markdown = "| name | value | words |\n|---|---|---|\n" + "".join(
        f"| {' | '.join(row)} |\n" for row in rows
    )

    passages = parse(markdown, "text/markdown", max_length=100)

    assert_bounded(passages, 100)
    assert {passage.subtype for passage in passages} == {"table"}
    lines = [line for passage in passages for line in passage.content.split("\n")]
    assert lines == ["name | value | words"] + [" | ".join(row) for row in rows]


def test_a_long_code_block_is_split_at_line_boundaries_keeping_indentation():
    code_lines = []
    for n in range(25):
        code_lines += [f"def function_{n}(value):", f"    return value * {n}", ""]
    code = "\n".join(code_lines).strip()

    passages = parse(f"```python\n{code}\n```\n", "text/markdown", max_length=100)

    assert_bounded(passages, 100)
    assert {passage.subtype for passage in passages} == {"code"}
    assert all(passage.content.startswith("def ") for passage in passages)
    lines = [line for passage in passages for line in passage.content.split("\n")]
    # Blank lines inside a passage are kept; at a cut they are stripped.
    assert [line for line in lines if line] == [line for line in code_lines if line]
    assert "" in lines
    assert "\n    return value * 3" in "\n".join(passage.content for passage in passages)


# Markdown


def test_markdown_document_passage_by_passage():
    markdown = """# Getting *started*

Welcome to the **platform**. Read the [guide](https://example.com/guide)
before you start, and see `bots.create`.

## Install

1. Download it.
2. Run it:
   - on Linux
   - on macOS

> Keep your token secret.
>
> It grants full access.

```sh
pip install bot-platform
  --upgrade
```

    indented code

| Plan | Price |
|------|------:|
| Free | 0 |
| Pro  | 10 &euro; |

### Limits

![diagram](limits.png) Limits apply per *bot*, not per workspace\\*.
"""
    passages = parse(markdown, "text/markdown", source_url="https://example.com/doc.md")

    assert summary(passages) == [
        ("title", "Getting started", None),
        (
            "paragraph",
            "Welcome to the platform. Read the guide before you start, and see bots.create.",
            None,
        ),
        ("subtitle", "Install", None),
        ("list", "1. Download it.\n2. Run it:\n  - on Linux\n  - on macOS", None),
        ("blockquote", "Keep your token secret.\n\nIt grants full access.", None),
        ("code", "pip install bot-platform\n  --upgrade", None),
        ("code", "indented code", None),
        ("table", "Plan | Price\nFree | 0\nPro | 10 €", None),
        ("subtitle", "Limits", None),
        ("paragraph", "Limits apply per bot, not per workspace*.", None),
    ]
    assert {passage.source_url for passage in passages} == {"https://example.com/doc.md"}
    assert {passage.type for passage in passages} == {"chunk"}


def test_markdown_front_matter_is_not_text_and_html_is_read_as_html():
    markdown = """---
title: Release notes
tags: [news]
---
First line<br>second line, <b>bold</b>.

<div align="center">
  <p>Centred <em>text</em></p>
</div>

- item with <kbd>Ctrl</kbd>

<!-- a comment -->
"""
    assert summary(parse(markdown, "text/markdown")) == [
        ("paragraph", "First line second line, bold.\n\nCentred text", None),
        ("list", "- item with Ctrl", None),
    ]


def test_markdown_content_type_aliases_and_parameters():
    markdown = make_markdown([("Title", ["Body text."])]).encode()
    expected = [("title", "Title", None), ("paragraph", "Body text.", None)]

    assert summary(parse(markdown, "text/x-markdown")) == expected
    assert summary(parse(markdown, "Text/Markdown; charset=UTF-8")) == expected


def test_large_markdown_parsed_in_sections_reads_as_one_document(monkeypatch):
    # Blank lines inside a fence, an HTML comment and a loose list must not
    # become section cuts; a reference defined at the end still reads as a link.
    chapters = []
    for n in range(12):
        chapters.append(
            f"## Chapter {n}\n\n{sentences(3, seed=n)}\n\n"
            f"```\ncode {n}\n\n\nHeading-looking line\n```\n\n"
            f"<!--\n\nnot text {n}\n\n-->\n\n"
            f"- loose item {n}\n\n- second loose item\n\n"
            f"See [the manual][manual] for chapter {n}.\n"
        )
    markdown = "\n".join(chapters) + "\n[manual]: https://example.com/manual\n"
    whole = parse(markdown, "text/markdown")

    monkeypatch.setattr("files.parsing.markdown._SECTION_SIZE", 300)
    sectioned = parse(markdown, "text/markdown")

    assert summary(sectioned) == summary(whole)
    assert ("paragraph", "See the manual for chapter 11.", None) in summary(whole)
    assert not any("not text" in passage.content for passage in whole)


# HTML


def test_html_document_passage_by_passage():
    body = """
    <header><h1>Release notes</h1></header>
    <div class="intro">Version <b>2.0</b> is out!<br>Upgrade
        soon.<p>All clients are <a href="/compat">compatible</a>.</p></div>
    <section>
      <h2>Changes</h2>
      <ul><li>Faster <em>indexing</em>
            <ul><li>for PDFs</li></ul></li>
          <li><p>New API</p></li></ul>
      <ol start="3"><li>third</li><li>fourth</li></ol>
      <table>
        <caption>Limits</caption>
        <thead><tr><th>Plan</th><th>Files</th></tr></thead>
        <tbody><tr><td>Free</td><td>10</td></tr><tr><td>Pro</td><td>1 000</td></tr></tbody>
      </table>
      <pre>
  curl https://api.example.com/v1/files
      -H "Authorization: Bearer ..."</pre>
      <blockquote><p>Fast and simple.</p><p>— A user</p></blockquote>
      <h3>Fixes</h3>
      Text directly in a section.
    </section>
    <script>var ignored = "script";</script><style>.ignored { }</style>
    <noscript><p>Enable JavaScript</p></noscript><template><p>template</p></template>
    """
    passages = parse(make_html(body, head="<title>Ignored title</title>"), "text/html")

    assert summary(passages) == [
        ("title", "Release notes", None),
        ("paragraph", "Version 2.0 is out! Upgrade soon.\n\nAll clients are compatible.", None),
        ("subtitle", "Changes", None),
        ("list", "- Faster indexing\n  - for PDFs\n- New API", None),
        ("list", "3. third\n4. fourth", None),
        ("paragraph", "Limits", None),
        ("table", "Plan | Files\nFree | 10\nPro | 1 000", None),
        ("code", 'curl https://api.example.com/v1/files\n    -H "Authorization: Bearer ..."', None),
        ("blockquote", "Fast and simple.\n\n— A user", None),
        ("subtitle", "Fixes", None),
        ("paragraph", "Text directly in a section.", None),
    ]


def test_html_title_is_a_passage_only_when_there_is_no_h1():
    html = make_html("<h2>Section</h2><p>Body.</p>", head="<title>Page  title</title>")

    assert summary(parse(html, "application/xhtml+xml")) == [
        ("title", "Page title", None),
        ("subtitle", "Section", None),
        ("paragraph", "Body.", None),
    ]


def test_html_canonical_url_wins_over_the_given_source_url():
    canonical = '<link rel="canonical" href="https://example.com/canonical">'
    relative = '<link rel="canonical" href="/relative">'
    body = "<p>Body.</p>"

    def urls(html: bytes) -> set[str]:
        passages = parse(html, "text/html", source_url="https://example.com/given")
        return {passage.source_url for passage in passages}

    assert urls(make_html(body, head=canonical)) == {"https://example.com/canonical"}
    assert urls(make_html(body, head=relative)) == {"https://example.com/given"}
    assert urls(make_html(body)) == {"https://example.com/given"}


def test_html_charset_from_its_meta_tag_or_the_content_type():
    html = '<html><head><meta charset="windows-1252"></head><body><p>Café €5</p></body></html>'
    data = html.encode("windows-1252")

    assert parse(data, "text/html")[0].content == "Café €5"
    assert parse(data, "text/html; charset=cp1252")[0].content == "Café €5"


def test_html_unknown_meta_charset_falls_back_to_utf8():
    html = '<meta http-equiv="Content-Type" content="text/html; charset=x-unknown"><p>Café</p>'

    assert parse(html, "text/html")[0].content == "Café"


# PDF


def test_multi_page_pdf_passage_by_passage():
    intro = (
        "This report describes the year of the platform, from the first customers to "
        "the launch of the document index, and what comes next for the team."
    )
    revenue = "Revenue grew in every quarter. " * 6
    costs = "Costs stayed flat while usage doubled over the year. " * 4
    data = make_pdf(
        [
            [
                ("title", "Annual Report"),
                ("paragraph", intro),
                ("subtitle", "Revenue"),
                ("paragraph", revenue),
            ],
            [
                ("subtitle", "Costs"),
                ("paragraph", costs),
                ("paragraph", "A short closing remark."),
            ],
            [
                ("subtitle", "Outlook for the year ahead"),
                ("paragraph", "We expect more customers and more documents."),
            ],
        ]
    )

    passages = parse(data, "application/pdf", source_url="https://example.com/report.pdf")

    assert summary(passages) == [
        ("title", "Annual Report", 1),
        ("paragraph", intro, 1),
        ("subtitle", "Revenue", 1),
        ("paragraph", revenue.strip(), 1),
        ("subtitle", "Costs", 2),
        ("paragraph", costs.strip() + "\n\nA short closing remark.", 2),
        ("subtitle", "Outlook for the year ahead", 3),
        ("paragraph", "We expect more customers and more documents.", 3),
    ]
    assert {passage.source_url for passage in passages} == {"https://example.com/report.pdf"}


def test_pdf_paragraphs_are_not_merged_across_pages():
    data = make_pdf([[("paragraph", "End of page one.")], [("paragraph", "Start of page two.")]])

    assert summary(parse(data, "application/pdf")) == [
        ("paragraph", "End of page one.", 1),
        ("paragraph", "Start of page two.", 2),
    ]


def test_pdf_wrapped_title_is_one_passage():
    title = "A very long title that certainly wraps onto a second line of the page"
    body = "Body text of the page, longer than the title. " * 3
    data = make_pdf([[("title", title), ("paragraph", body)]])

    assert summary(parse(data, "application/pdf")) == [
        ("title", title, 1),
        ("paragraph", body.strip(), 1),
    ]


def test_pdf_nul_characters_are_dropped():
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.cell(0, 10, "NUL\x00inside")

    assert summary(parse(bytes(pdf.output()), "application/pdf")) == [("paragraph", "NULinside", 1)]


def test_pdf_ligatures_are_spelled_out():
    # Core PDF fonts cannot draw ligatures, so the text is fed to the reader
    # the way pypdf reports it: run, matrices, font, size.
    from files.parsing.pdf import _LineCollector

    collector = _LineCollector(page_number=1)
    identity = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    collector("The \ufb01le is \ufb02at\n", identity, [1, 0, 0, 1, 72, 700], None, 11)

    assert [line.text for line in collector.finish()] == ["The file is flat"]


def test_pdf_with_only_an_owner_password_opens():
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.cell(0, 10, "Readable without a password.")
    pdf.set_encryption(owner_password="owner-secret")

    passages = parse(bytes(pdf.output()), "application/pdf")

    assert [passage.content for passage in passages] == ["Readable without a password."]


# Charsets


def test_charset_parameter_is_used_for_text():
    data = "Café crème à la carte.".encode("latin-1")

    passages = parse(data, "text/plain; charset=latin-1")

    assert [passage.content for passage in passages] == ["Café crème à la carte."]


def test_utf8_byte_order_mark_is_dropped():
    passages = parse("\ufeffHello.".encode(), "text/plain")

    assert [passage.content for passage in passages] == ["Hello."]


# Errors


def test_unsupported_content_type_names_it_and_the_supported_ones():
    reason = unreadable_reason(b"PK\x03\x04", "application/zip")

    assert "application/zip" in reason
    for content_type in SUPPORTED_CONTENT_TYPES:
        assert content_type in reason


def test_empty_file():
    assert "empty" in unreadable_reason(b"", "text/plain")


def test_text_invalid_in_its_charset_says_where_and_what_to_do():
    reason = unreadable_reason("Café".encode("latin-1"), "text/plain")

    assert "offset 3" in reason
    assert "UTF-8" in reason and "charset" in reason


def test_invalid_byte_offset_counts_the_byte_order_mark():
    reason = unreadable_reason(b"\xef\xbb\xbfab\xff", "text/markdown")

    assert "offset 5" in reason


def test_text_with_nul_bytes_looks_binary():
    assert "binary" in unreadable_reason(b"text\x00\x01\x02more", "text/plain")


def test_unknown_charset():
    reason = unreadable_reason(b"text", "text/plain; charset=klingon-8")

    assert "klingon-8" in reason and "charset" in reason


def test_a_codec_that_is_not_a_text_charset_is_unknown():
    assert "charset" in unreadable_reason(b"dGV4dA==", "text/plain; charset=base64")


@pytest.mark.parametrize("content_type", ["text/plain", "text/markdown", "text/html"])
def test_document_without_text(content_type):
    blank = b"<html><body><script>x()</script></body></html>" if "html" in content_type else b" \n"

    assert "no text" in unreadable_reason(blank, content_type)


def test_pdf_without_text_says_scanned_pages_are_not_read():
    pdf = FPDF()
    pdf.add_page()
    pdf.rect(20, 20, 100, 100, style="F")

    reason = unreadable_reason(bytes(pdf.output()), "application/pdf")

    assert "scanned" in reason and "OCR" in reason


def test_encrypted_pdf():
    reason = unreadable_reason(encrypted_pdf(), "application/pdf")

    assert reason.startswith("The PDF is encrypted: upload it without a password")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (truncated_pdf(), "incomplete"),
        (garbage_pdf(), "incomplete"),
        (b"%PDF-1.7\ngarbage in the middle\n%%EOF\n", "damaged"),
        (b"Just some text", "not a PDF"),
    ],
)
def test_corrupt_pdf_is_explained_and_logged(data, expected, caplog):
    with caplog.at_level(logging.WARNING, logger="files.parsing.pdf"):
        reason = unreadable_reason(data, "application/pdf")

    assert expected in reason
    records = [record for record in caplog.records if record.name == "files.parsing.pdf"]
    assert records and all(record.levelno == logging.WARNING for record in records)
    assert records[0].exc_info is not None
