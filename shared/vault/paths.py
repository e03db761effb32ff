"""Turn a user-supplied (project, path) into a file path inside the vault, or refuse with a reason.

Every API and CLI entry point that touches a vault file goes through :func:`resolve_vault_path`.
The rules are deliberately stricter than the file system: a vault holds markdown written by people,
so a name that needs percent-escapes, dotfiles, control characters or look-alike punctuation is far
more likely an attack (or a mistake) than a document.

Hand-written rather than taken from a library: the checks are specific to this vault layout
(one folder per project, no dotfiles) and ``werkzeug.utils.safe_join`` covers only ``..`` and
absolute paths, not encodings, look-alikes or symlinks.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote_to_bytes

MAX_PATH_CHARS = 1024
MAX_SEGMENT_BYTES = 255  # the usual file-system limit for one name
MAX_DEPTH = 32
MAX_PROJECT_CHARS = 100
# Each round of percent-decoding must shrink the string, so a handful of rounds is plenty for any
# honest input; more layers than this is an attack on a decoder somewhere.
MAX_DECODE_ROUNDS = 4

_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
#: The one rule for project names (top-level vault folders), used by the vault, the API schemas and the
#: CLI. Lower case only: OpenSearch index names must be lower case, and two folders that differ only in
#: case would be one folder on a case-insensitive checkout. No trailing dot: Windows drops it.
PROJECT_PATTERN = rf"^[a-z0-9](?:[a-z0-9._-]{{0,{MAX_PROJECT_CHARS - 2}}}[a-z0-9_-])?$"
PROJECT_RULE = (f"1-{MAX_PROJECT_CHARS} characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit "
                "and not ending with '.'")
_PROJECT_NAME = re.compile(PROJECT_PATTERN)
_DRIVE_LETTER = re.compile(r"^[A-Za-z]:")
# Characters that play a structural role in a path on some platform.
_STRUCTURAL = frozenset("./\\:")
# Look-alikes that NFKC leaves alone but that render as a slash, backslash or dot.
_CONFUSABLES = frozenset(
    "\u2215"  # DIVISION SLASH
    "\u2044"  # FRACTION SLASH
    "\u29f8"  # BIG SOLIDUS
    "\u29f9"  # BIG REVERSE SOLIDUS
    "\u2216"  # SET MINUS
    "\u3002"  # IDEOGRAPHIC FULL STOP
    "\u00b7"  # MIDDLE DOT
    "\u2027"  # HYPHENATION POINT
    "\u02d9"  # DOT ABOVE
)
# Unicode categories that have no business in a file name: controls, format characters (zero-width
# and bidi overrides), surrogates (undecodable bytes), private use, line/paragraph separators.
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


class UnsafePath(ValueError):
    """A path or project name that is refused; ``str(exc)`` is a short reason fit for a user."""


def validate_project_name(name: object) -> str:
    """Return ``name`` if it is a usable project (top-level folder) name, else raise :class:`UnsafePath`.

    A project name is lower-case ASCII letters, digits, ``.``, ``_`` and ``-``, starts with a letter
    or digit, does not end with a dot and is at most 100 characters (``PROJECT_PATTERN``).
    """
    if not isinstance(name, str):
        raise UnsafePath("project name must be a string")
    if not name:
        raise UnsafePath("project name is empty")
    if len(name) > MAX_PROJECT_CHARS:
        raise UnsafePath(f"project name is longer than {MAX_PROJECT_CHARS} characters")
    if not _PROJECT_NAME.fullmatch(name):
        raise UnsafePath(f"project name must be {PROJECT_RULE}")
    return name


def _percent_decode_fully(text: str) -> str:
    """Decode percent-escapes until the text stops changing; refuse invalid UTF-8 (e.g. overlong %c0%ae)."""
    current = text
    for _ in range(MAX_DECODE_ROUNDS):
        if not _PERCENT_ESCAPE.search(current):
            return current
        raw = unquote_to_bytes(current)
        try:
            # Strict UTF-8 rejects overlong forms such as C0 AE (a disguised '.').
            current = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UnsafePath("path contains percent-encoding that is not valid UTF-8") from None
    if _PERCENT_ESCAPE.search(current):
        raise UnsafePath("path has too many layers of percent-encoding")
    return current


def _check_characters(text: str) -> None:
    """Refuse NUL, control and invisible characters and look-alikes of path punctuation."""
    for char in text:
        if char == "\x00":
            raise UnsafePath("path contains a NUL character")
        if unicodedata.category(char) in _FORBIDDEN_CATEGORIES:
            raise UnsafePath(f"path contains a control or invisible character (U+{ord(char):04X})")
        if char in _CONFUSABLES:
            raise UnsafePath(f"path contains a look-alike of '/', '\\' or '.' (U+{ord(char):04X})")
        if char not in _STRUCTURAL and not char.isascii():
            folded = unicodedata.normalize("NFKC", char)
            if any(c in _STRUCTURAL or c == "%" for c in folded):
                raise UnsafePath(f"path contains a look-alike of '/', '\\', ':' or '.' (U+{ord(char):04X})")


def _check_structure(text: str) -> list[str]:
    """Refuse absolute paths, drive letters, backslashes and bad segments; return the segments."""
    if text.startswith("/"):
        raise UnsafePath("path must be relative to the project, not absolute")
    if _DRIVE_LETTER.match(text):
        raise UnsafePath("path must not start with a drive letter")
    if "\\" in text:
        raise UnsafePath("path must use '/' as separator, not '\\'")
    if ":" in text:
        # Drive-relative names ("C:foo") and NTFS alternate streams ("a.md:evil") both use ':'.
        raise UnsafePath("path must not contain ':'")
    segments = text.split("/")
    if len(segments) > MAX_DEPTH:
        raise UnsafePath(f"path is deeper than {MAX_DEPTH} folders")
    for segment in segments:
        if segment == "":
            raise UnsafePath("path has an empty segment ('//' or a trailing '/')")
        if segment == "..":
            raise UnsafePath("path must not contain '..'")
        if segment == ".":
            raise UnsafePath("path must not contain '.' segments")
        if segment.lower() == ".git":
            raise UnsafePath("path must not point into .git")
        if segment.startswith("."):
            raise UnsafePath("path must not contain hidden files or folders (names starting with '.')")
        if segment.endswith((" ", ".")):
            raise UnsafePath("path segments must not end with a space or '.'")
        if len(segment.encode("utf-8")) > MAX_SEGMENT_BYTES:
            raise UnsafePath(f"a path segment is longer than {MAX_SEGMENT_BYTES} bytes")
    return segments


def _check_text(user_path: str) -> list[str]:
    """All lexical checks on one form of the path; returns its segments."""
    _check_characters(user_path)
    return _check_structure(user_path)


def resolve_vault_path(root: Path, project: str, user_path: str) -> Path:
    """Map ``(project, user_path)`` to an absolute path under ``root/project``, or raise :class:`UnsafePath`.

    ``user_path`` is the path inside the project, POSIX-style (``runbooks/deploy.md``), already
    URL-decoded once by the HTTP layer. It is refused if it, or any further percent-decoding of it,
    contains ``..``, ``.`` or dot-segments, an absolute or drive-letter start, backslashes, ``:``,
    NUL/control/invisible characters or Unicode look-alikes of ``/ \\ .``. Literal percent-escapes
    (``%XX``) are refused too, so no later layer can decode the name into something else.
    Finally symlinks are resolved: the project folder must be a real folder directly under the
    root, and the target must stay inside it. The file itself need not exist.

    The returned path is ``root.resolve() / project / user_path`` (not symlink-resolved), so
    callers can write to it and :func:`relative_posix` gives back the vault path.
    """
    project = validate_project_name(project)
    if not isinstance(user_path, str):
        raise UnsafePath("path must be a string")
    if not user_path:
        raise UnsafePath("path is empty")
    if len(user_path) > MAX_PATH_CHARS:
        raise UnsafePath(f"path is longer than {MAX_PATH_CHARS} characters")

    # The decoded form first: its refusal names what an escape was hiding ("..", NUL, ...).
    decoded = _percent_decode_fully(user_path)
    if decoded != user_path:
        _check_text(decoded)
    segments = _check_text(user_path)
    if decoded != user_path:
        raise UnsafePath("path must not contain percent-encoded characters (%XX)")
    if unicodedata.normalize("NFKC", user_path) != user_path:
        # Belt and braces: per-character look-alikes were refused above; this catches any
        # sequence whose compatibility form still turns into a separator or dot segment.
        _check_text(unicodedata.normalize("NFKC", user_path))

    real_root = Path(root).resolve()
    project_dir = real_root / project
    real_project = project_dir.resolve()
    if real_project != project_dir:
        raise UnsafePath("project folder is a symlink")
    candidate = project_dir.joinpath(*segments)
    real_candidate = candidate.resolve()
    if not real_candidate.is_relative_to(real_project):
        raise UnsafePath("path resolves outside the project folder (symlink)")
    return candidate


def relative_posix(root: Path, path: Path) -> str:
    """The vault path of ``path`` as a POSIX string relative to ``root`` (``proj/runbooks/deploy.md``).

    Both are compared after resolving ``root``; raises :class:`UnsafePath` if ``path`` is not under it.
    """
    real_root = Path(root).resolve()
    path = Path(path)
    absolute = path if path.is_absolute() else real_root / path
    relative: Path | None = None
    # Lexical first (keeps a symlinked file's own name), then with symlinks resolved.
    for base, target in ((real_root, absolute), (Path(root).absolute(), absolute), (real_root, absolute.resolve())):
        try:
            relative = target.relative_to(base)
            break
        except ValueError:
            continue
    if relative is None:
        raise UnsafePath("path is outside the vault")
    if ".." in relative.parts:
        raise UnsafePath("path is outside the vault")
    return relative.as_posix()
