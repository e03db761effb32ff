"""With-context: the chunks around each result, its full breadcrumb and a link to the vault file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote

from sqlalchemy import text
from sqlalchemy.orm import Session

from shared.config import Settings

MAX_CONTEXT_CHUNKS = 5


@dataclass(frozen=True)
class Neighbour:
    """An adjacent chunk of the same document."""

    id: str
    ordinal: int
    level: int
    section: str
    anchor: str
    text: str

    def to_dict(self) -> dict[str, object]:
        """JSON shape inside ``context.previous`` / ``context.next``."""
        return {"id": self.id, "ordinal": self.ordinal, "level": self.level, "section": self.section,
                "anchor": self.anchor, "text": self.text}


def fetch_neighbours(
    session: Session, anchors: Sequence[tuple[int, int]], radius: int
) -> dict[tuple[int, int], tuple[list[Neighbour], list[Neighbour]]]:
    """For each ``(document id, ordinal)``: the ``radius`` chunks before and after it, in document order.

    One query for all results (a join against the unnested windows), whatever the documents' sizes.
    """
    if radius <= 0 or not anchors:
        return {key: ([], []) for key in anchors}
    docs = [int(d) for d, _ in anchors]
    ordinals = [int(o) for _, o in anchors]
    rows = session.execute(
        text(
            "SELECT w.doc, w.ord, c.id, c.ordinal, c.level, c.section_title, c.anchor, c.text "
            "FROM unnest(CAST(:docs AS bigint[]), CAST(:ords AS int[])) AS w(doc, ord) "
            "JOIN chunks c ON c.document_id = w.doc "
            "AND c.ordinal BETWEEN w.ord - :r AND w.ord + :r AND c.ordinal <> w.ord "
            "ORDER BY w.doc, w.ord, c.ordinal"
        ),
        {"docs": docs, "ords": ordinals, "r": int(radius)},
    ).all()
    out: dict[tuple[int, int], tuple[list[Neighbour], list[Neighbour]]] = {key: ([], []) for key in anchors}
    for doc, ordinal, cid, c_ord, level, section, anchor, body in rows:
        before, after = out[(int(doc), int(ordinal))]
        neighbour = Neighbour(str(cid), int(c_ord), int(level), section, anchor, body)
        (before if c_ord < ordinal else after).append(neighbour)
    return out


def vault_url(settings: Settings, project: str, source: str, anchor: str) -> str | None:
    """A browser link to the document in the vault's forge, at the section; None without a forge.

    Forgejo's layout is ``<base>/<owner>/<repo>/src/branch/<branch>/<path>``; the vault repository
    holds one folder per project.
    """
    path = quote(f"{project}/{source}")
    fragment = f"#{quote(anchor)}" if anchor else ""
    branch = quote(settings.vault_branch)
    if settings.forgejo_url and settings.forgejo_repo:
        base = settings.forgejo_url.rstrip("/")
        return f"{base}/{settings.forgejo_repo.strip('/')}/src/branch/{branch}/{path}{fragment}"
    remote = settings.vault_remote or ""
    if remote.startswith(("https://", "http://")) and "@" not in remote.split("/")[2]:
        base = remote.rstrip("/").removesuffix(".git")
        return f"{base}/src/branch/{branch}/{path}{fragment}"
    return None


def breadcrumb_full(project: str, breadcrumb: str, section: str) -> str:
    """``project > folders > title > sections``, ending with the chunk's own section."""
    parts = [project, *[p for p in breadcrumb.split(" > ") if p]]
    if section and parts[-1] != section:
        parts.append(section)
    return " > ".join(parts)
