"""The markdown parser and chunker: structure, metadata, levels, limits and stable ids."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from shared.embedding.local import TokenCounter
from shared.vault.document import LEVEL_DOCUMENT, LEVEL_PIECE, LEVEL_SECTION, ParsedDocument
from shared.vault.markdown import chunk_id, parse_markdown, parse_sections, slugify

FIXTURES = Path(__file__).parent / "fixtures" / "markdown"


def words(text: str) -> int:
    """A simple additive token counter: one token per whitespace-separated word."""
    return len(text.split())


def parse(
    text: str,
    path: str = "runbooks/deploy.md",
    max_tokens: int = 256,
    overlap: int = 32,
    counter=words,
) -> ParsedDocument:
    return parse_markdown(
        path,
        text,
        doc_key=f"team/{path}",
        max_tokens=max_tokens,
        overlap_tokens=overlap,
        count_tokens=counter,
    )


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def section_chunks(doc: ParsedDocument) -> list:
    return [c for c in doc.chunks if c.level != LEVEL_DOCUMENT]


# --- structure ----------------------------------------------------------------------------------


def test_nested_headings_give_breadcrumbs_anchors_and_lines() -> None:
    doc = parse(fixture("nested.md"), path="runbooks/payments/deploy.md")
    assert doc.title == "Deploying the payments API"
    assert doc.tags == ["deploy", "payments", "k8s"]
    assert doc.front_matter["owner"] == "platform-team"
    assert doc.front_matter["reviewed"] == "2024-03-01"  # a YAML date, made JSON-safe
    titles = [(s.level, s.title, s.anchor) for s in doc.sections]
    assert titles == [
        (0, "", ""),
        (1, "Deploying the payments API", "deploying-the-payments-api"),
        (2, "Before you start", "before-you-start"),
        (3, "Credentials", "credentials"),
        (2, "Rollout", "rollout"),
        (2, "Rollback", "rollback"),
        (2, "Rollback", "rollback-1"),
    ]
    lines = fixture("nested.md").split("\n")
    for section in doc.sections:
        assert section.content.split("\n")[0] == lines[section.start_line - 1]
        assert section.content.split("\n")[-1] == lines[section.end_line - 1]
    credentials = next(c for c in doc.chunks if c.section_title == "Credentials")
    assert credentials.breadcrumb == (
        "runbooks > payments > Deploying the payments API > Before you start > Credentials"
    )
    assert credentials.anchor == "credentials"
    assert credentials.level == LEVEL_SECTION


def test_hash_inside_code_fences_is_not_a_heading() -> None:
    doc = parse(fixture("nested.md"))
    assert not any("comment" in s.title or "fence" in s.title for s in doc.sections)
    rollout = next(c for c in doc.chunks if c.section_title == "Rollout")
    assert "# this is a shell comment, not a heading" in rollout.text
    assert "# still inside the fence" in rollout.text
    assert rollout.text.rstrip().endswith("~~~")


def test_unclosed_fence_swallows_the_rest() -> None:
    doc = parse("# A\n\n```\n# not a heading\n## nor this\n")
    assert [s.title for s in doc.sections] == ["A"]


def test_setext_headings() -> None:
    doc = parse(fixture("setext.md"), path="reviews/2024-01-incident.md")
    assert doc.title == "Incident review"
    assert [(s.level, s.title, s.start_line) for s in doc.sections] == [
        (1, "Incident review", 1),
        (2, "Timeline", 6),
        (2, "Follow-ups", 12),
    ]
    timeline = next(c for c in doc.chunks if c.section_title == "Timeline")
    assert timeline.text.startswith("Timeline\n--------")
    assert timeline.breadcrumb == "reviews > Incident review > Timeline"


def test_duplicate_headings_get_numbered_anchors() -> None:
    text = "# Steps\n\na\n\n# Steps\n\nb\n\n# Steps-1\n\nc\n\n# Steps\n\nd\n"
    assert [s.anchor for s in parse_sections(text)] == ["steps", "steps-1", "steps-1-1", "steps-2"]


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Hello World", "hello-world"),
        ("Use `kubectl` now!", "use-kubectl-now"),
        ("Ünïcödé Straße", "ünïcödé-straße"),
        ("a  b", "a--b"),
        ("snake_case and-dash", "snake_case-and-dash"),
        ("日本語 タイトル", "日本語-タイトル"),
        ("What's new? (v2.0)", "whats-new-v20"),
    ],
)
def test_slugify_matches_github(title: str, slug: str) -> None:
    assert slugify(title) == slug


def test_heading_title_is_rendered_text() -> None:
    sections = parse_sections("## Run `make test` via [CI](https://ci) **now** ##\n\nbody\n")
    assert sections[0].title == "Run make test via CI now"
    assert sections[0].anchor == "run-make-test-via-ci-now"


def test_headings_in_lists_and_quotes_do_not_split() -> None:
    doc = parse("# Top\n\n- # listed\n\n> # quoted\n\ntext\n")
    assert [s.title for s in doc.sections] == ["Top"]


# --- front matter -------------------------------------------------------------------------------


def test_broken_front_matter_is_ignored_but_body_kept() -> None:
    doc = parse(fixture("broken_front_matter.md"))
    assert doc.front_matter == {}
    assert doc.tags == []
    assert doc.title == "Real title"
    assert any("Body survives broken front matter." in c.text for c in doc.chunks)
    assert not any("unclosed" in c.text for c in doc.chunks)


def test_no_front_matter_and_no_heading_uses_the_file_stem() -> None:
    doc = parse("Just a note about the cache.\n", path="notes/cache-notes.md")
    assert doc.title == "cache-notes"
    assert doc.front_matter == {}
    assert len(doc.chunks) == 1  # the whole text fits in L0
    assert doc.chunks[0].level == LEVEL_DOCUMENT
    assert "Just a note about the cache." in doc.chunks[0].text
    assert doc.chunks[0].breadcrumb == "notes > cache-notes"


def test_front_matter_not_a_mapping_or_unclosed() -> None:
    assert parse("---\n- a\n- b\n---\ntext\n").front_matter == {}
    unclosed = parse("---\ntitle: x\n\nbody\n")
    assert unclosed.front_matter == {}
    assert any("body" in c.text for c in unclosed.chunks)


def test_tags_as_comma_string_and_title_from_front_matter() -> None:
    doc = parse("---\ntitle: Front title\ntags: ci, flaky , ,ci\nsummary: Short.\n---\n# Heading\n\nx\n")
    assert doc.title == "Front title"
    assert doc.tags == ["ci", "flaky"]
    l0 = doc.chunks[0]
    assert l0.text.startswith("Front title\n\nShort.")


def test_file_of_only_front_matter() -> None:
    doc = parse("---\ntitle: Placeholder\ntags: [todo]\n---\n", path="todo.md")
    assert doc.title == "Placeholder"
    assert doc.sections == []
    assert [c.level for c in doc.chunks] == [LEVEL_DOCUMENT]
    assert doc.chunks[0].text == "Placeholder"


def test_empty_file() -> None:
    doc = parse("", path="docs/empty.md")
    assert doc.title == "empty"
    assert doc.sections == []
    assert [c.text for c in doc.chunks] == ["empty"]
    assert doc.chunks[0].start_line == doc.chunks[0].end_line == 1


# --- line endings and unicode ---------------------------------------------------------------------


def test_crlf_and_cr_line_endings_match_lf() -> None:
    lf = fixture("nested.md")
    for ending in ("\r\n", "\r"):
        other = parse(lf.replace("\n", ending))
        base = parse(lf)
        assert [c.text for c in other.chunks] == [c.text for c in base.chunks]
        assert [(s.start_line, s.end_line) for s in other.sections] == [
            (s.start_line, s.end_line) for s in base.sections
        ]
        assert other.front_matter == base.front_matter
        assert other.content_sha != base.content_sha  # the hash is of the file as stored


def test_unicode_text() -> None:
    text = "# Überblick 🚀\n\nDas Deployment läuft über Argo CD. 日本語のテキスト。\n\n## Ünïcödé\n\nçà\n"
    doc = parse(text)
    assert [s.anchor for s in doc.sections] == ["überblick-", "ünïcödé"]
    assert any("日本語のテキスト" in c.text for c in doc.chunks)


# --- levels ---------------------------------------------------------------------------------------


def test_levels_l0_then_sections_in_order() -> None:
    doc = parse(fixture("nested.md"))
    assert doc.chunks[0].level == LEVEL_DOCUMENT
    assert doc.chunks[0].ordinal == 0
    assert doc.chunks[0].text.startswith(
        "Deploying the payments API\n\nHow the payments API is shipped and rolled back."
    )
    assert "This runbook is for the on-call engineer." in doc.chunks[0].text
    assert all(c.level == LEVEL_SECTION for c in doc.chunks[1:])
    assert [c.ordinal for c in doc.chunks] == list(range(len(doc.chunks)))
    starts = [c.start_line for c in doc.chunks[1:]]
    assert starts == sorted(starts)


def test_empty_section_folds_into_the_next_chunk() -> None:
    doc = parse("# Guide\n## Setup\n### Install\n\npip install it\n\n## Use\n\nrun it\n")
    sections = section_chunks(doc)
    assert [c.section_title for c in sections] == ["Install", "Use"]
    assert sections[0].text.startswith("# Guide\n## Setup\n### Install")
    assert sections[0].start_line == 1
    assert all(c.text.strip() for c in doc.chunks)


def test_trailing_empty_headings_are_kept() -> None:
    doc = parse("# Guide\n\nintro\n\n## Later\n\n## Much later\n")
    last = doc.chunks[-1]
    assert last.text == "## Later\n\n## Much later"
    assert last.section_title == "Much later"


def test_huge_section_is_split_within_the_limit_with_overlap() -> None:
    body = "\n\n".join(
        " ".join(f"w{p}_{i}" for i in range(12)) for p in range(80)
    )  # 80 paragraphs of 12 words
    doc = parse(f"# Title\n\n## Big\n\n{body}\n\n## Small\n\nsmall text\n", max_tokens=60, overlap=10)
    pieces = [c for c in doc.chunks if c.level == LEVEL_PIECE]
    assert len(pieces) > 5
    assert all(c.token_count <= 60 and words(c.text) <= 60 for c in pieces)
    assert pieces[0].text.startswith("# Title\n\n## Big\n")  # the empty H1 folded in
    assert all(p.text.startswith("## Big\n") for p in pieces[1:])
    assert all(p.section_title == "Big" and p.anchor == "big" for p in pieces)
    for before, after in zip(pieces, pieces[1:], strict=False):
        tail = " ".join(before.text.split()[-5:])
        assert tail in after.text.split("\n", 2)[1]  # the previous piece's tail opens the next one
        assert after.start_line <= before.end_line
    # every paragraph lands in some piece
    for p in range(80):
        assert any(f"w{p}_0 " in c.text for c in pieces)
    assert doc.chunks[-1].level == LEVEL_SECTION and doc.chunks[-1].section_title == "Small"


def test_huge_section_with_the_real_tokenizer() -> None:
    counter = TokenCounter()
    paragraph = "Restart the ingest worker, then check the queue depth in the dashboard. " * 3
    text = "# Ops\n\n## Long\n\n" + "\n\n".join(f"{i}. {paragraph}" for i in range(60))
    doc = parse(text, max_tokens=128, overlap=16, counter=counter)
    pieces = [c for c in doc.chunks if c.level == LEVEL_PIECE]
    assert len(pieces) > 3
    assert all(counter(c.text) <= 128 for c in doc.chunks)
    assert all(c.token_count == counter(c.text) for c in doc.chunks)


def test_code_fence_is_not_cut_unless_too_long_alone() -> None:
    fence = "```python\n" + "\n".join(f"x{i} = {i}  # step {i}" for i in range(6)) + "\n```"
    text = "# Code\n\n" + "\n\n".join(["intro words " * 4, fence, "middle words " * 4, fence, "end words"])
    doc = parse(text, max_tokens=40, overlap=0)
    for chunk in doc.chunks[1:]:
        assert chunk.text.count("```") % 2 == 0, chunk.text  # fences whole
    long_fence = "```\n" + "\n".join(f"line {i} of a very long listing" for i in range(60)) + "\n```"
    doc = parse(f"# Code\n\n{long_fence}\n", max_tokens=40, overlap=0)
    pieces = [c for c in doc.chunks if c.level == LEVEL_PIECE]
    assert len(pieces) > 3 and all(words(c.text) <= 40 for c in pieces)
    for i in range(60):
        assert any(f"line {i} of" in c.text for c in pieces)


def test_single_huge_line_and_word_are_cut() -> None:
    line = " ".join(f"token{i}" for i in range(500))
    blob = "A" * 10_000
    doc = parse(f"# Big line\n\n{line}\n\n{blob}\n", max_tokens=50, overlap=5)
    assert all(words(c.text) <= 50 for c in doc.chunks)
    assert all(len(c.text) <= 50 * 16 for c in doc.chunks)
    joined = "".join(c.text for c in doc.chunks)
    assert "token499" in joined and joined.count("A") >= 10_000


def test_a_paragraph_on_one_long_line_is_cut_at_sentence_ends() -> None:
    # Exported abstracts and some editors put a whole paragraph on one line. The chunker used to
    # cut only between lines there, so the first piece got the heading alone, a chunk with no text.
    sentences = [f"Sentence {i} says " + " ".join(f"w{i}_{j}" for j in range(8)) + "." for i in range(30)]
    paragraph = " ".join(sentences)
    doc = parse("# Findings\n\n" + paragraph + "\n", max_tokens=60, overlap=5)
    l0, *rest = doc.chunks
    assert (l0.level, l0.text) == (LEVEL_DOCUMENT, "Findings")  # no lead text: the title card
    assert rest and all(c.level == LEVEL_PIECE for c in rest)
    for chunk in rest:
        assert chunk.text.removeprefix("# Findings").strip(), f"chunk {chunk.ordinal} holds only its heading"
        assert words(chunk.text) <= 60
    for chunk in rest[:-1]:
        assert chunk.text.endswith("."), chunk.text[-40:]  # every full chunk ends at a sentence end
    for i in range(30):
        assert any(f"Sentence {i} says" in c.text for c in rest)
    # The same paragraph as lead text (before any heading) fills L0 up to a sentence end.
    lead = parse(paragraph + "\n\n## Next\n\nmore\n", path="notes.md", max_tokens=60, overlap=5).chunks[0]
    assert lead.level == LEVEL_DOCUMENT and lead.text.startswith("notes\n\nSentence 0 says")
    assert lead.text.endswith(".") and words(lead.text) > 40
    quoted = parse('# Q\n\n' + ' '.join(f'He said "stop {i}." Then (x{i}) went.' for i in range(40)) + "\n",
                   max_tokens=30, overlap=0)
    text = " ".join(c.text for c in quoted.chunks)
    assert all(f'"stop {i}."' in text and f"(x{i}) went." in text for i in range(40))  # no character lost


def test_no_headings_long_text_becomes_pieces_after_l0() -> None:
    text = "\n\n".join(f"Paragraph {i} " + "filler " * 10 for i in range(30))
    doc = parse(text, path="n.md", max_tokens=50, overlap=5)
    assert doc.chunks[0].level == LEVEL_DOCUMENT
    pieces = doc.chunks[1:]
    assert pieces and all(c.level == LEVEL_PIECE for c in pieces)
    assert all(c.section_title == "" and c.breadcrumb == "n" for c in pieces)
    for i in range(30):
        assert any(f"Paragraph {i} " in c.text for c in pieces)


# --- ids and bad input ----------------------------------------------------------------------------


def test_ids_are_stable_unique_and_derived_from_doc_key() -> None:
    first = parse(fixture("nested.md"))
    second = parse(fixture("nested.md"))
    assert [c.id for c in first.chunks] == [c.id for c in second.chunks]
    assert len({c.id for c in first.chunks}) == len(first.chunks)
    assert first.chunks[3].id == chunk_id("team/runbooks/deploy.md", 3)
    assert len(first.chunks[0].id) == 32
    other = parse(fixture("nested.md"), path="runbooks/other.md")
    assert not {c.id for c in other.chunks} & {c.id for c in first.chunks}


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(TypeError, match="must be str"):
        parse(b"# bytes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tokens"):
        parse("x", max_tokens=3, overlap=0)
    with pytest.raises(ValueError, match="overlap_tokens"):
        parse("x", max_tokens=100, overlap=80)
    with pytest.raises(ValueError, match="path"):
        parse("x", path="")


# --- properties -----------------------------------------------------------------------------------

_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyzÄé日#`*-_", min_size=1, max_size=8)
_line = st.one_of(
    st.lists(_word, min_size=1, max_size=6).map(" ".join),
    st.builds(lambda n, t: "#" * n + " " + t, st.integers(1, 6), st.lists(_word, max_size=4).map(" ".join)),
    st.sampled_from(["", "", "```", "~~~", "---", "===", "- item", "> quote", "    indented code", "\t"]),
)
_document = st.lists(_line, max_size=60).map("\n".join)
_front = st.sampled_from(["", "---\ntitle: T\ntags: [a]\n---\n", "---\n: bad: [\n---\n"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(front=_front, body=_document, ending=st.sampled_from(["\n", "\r\n", "\r"]))
def test_property_every_body_line_is_in_a_chunk_and_ids_are_stable(
    front: str, body: str, ending: str
) -> None:
    assume(front or not body.startswith("---"))  # else the body's own --- lines would be front matter
    text = (front + body).replace("\n", ending)
    first = parse(text, max_tokens=24, overlap=4)
    second = parse(text, max_tokens=24, overlap=4)
    assert [c.id for c in first.chunks] == [c.id for c in second.chunks]
    assert [c.text for c in first.chunks] == [c.text for c in second.chunks]
    assert len({c.id for c in first.chunks}) == len(first.chunks)
    assert first.chunks[0].level == LEVEL_DOCUMENT
    assert all(c.text.strip() for c in first.chunks)
    assert all(words(c.text) <= 24 for c in first.chunks)
    for line in body.split("\n"):
        if line.strip():
            assert any(line.strip() in c.text for c in first.chunks), line


# The block scanner against a full CommonMark parser (markdown-it-py), on documents made of lines that
# exercise headings, fences, HTML blocks, lists and quotes and their interactions.
_TRICKY_LINES = [
    *["", "", "text", "more text", "Title", "===", "---", "- - -", "***", "-", "*", "+ plus"],
    *["# H1", "## H2 ##", "### `code` *em*", "#nospace", "   ### three", "\\# escaped", "\t# tab"],
    *["# [link](x) &amp; <b>b</b>", "- item", "- # in item", "  continued", "    indented"],
    *["  # two-space heading", "1. one", "2) two", "> quote", "> # qh", ">", "> ```"],
    *[
        "```",
        "```py",
        "~~~",
        "````",
        "  ```",
        "   ~~~",
        "<div>",
        "</div>",
        "<!-- c",
        "-->",
        "<pre>",
        "</pre>",
    ],
    "<span>",
]


def _reference_headings(text: str) -> list[tuple[int, int, int, str]]:
    markdown_it = pytest.importorskip("markdown_it")
    tokens = markdown_it.MarkdownIt("commonmark").parse(text)
    found = []
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and token.level == 0:
            parts = []
            for child in tokens[index + 1].children or []:
                if child.type in ("text", "code_inline", "image"):
                    parts.append(child.content)
                elif child.type in ("softbreak", "hardbreak"):
                    parts.append(" ")
            title = " ".join("".join(parts).split())
            found.append((token.map[0] + 1, token.map[1], int(token.tag[1]), title))
    return found


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_TRICKY_LINES), max_size=30))
def test_property_headings_match_a_commonmark_parser(lines: list[str]) -> None:
    text = "\n".join(lines)
    assume(not text.startswith("---"))  # front matter is ours, not CommonMark's
    ours = [(s.start_line, s.end_line, s.level, s.title) for s in parse_sections(text) if s.level > 0]
    reference = _reference_headings(text)
    # A section's end line is its last non-blank line, the reference's is the heading's own last line.
    assert [(start, level, title) for start, _, level, title in ours] == [
        (start, level, title) for start, _, level, title in reference
    ]
