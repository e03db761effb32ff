"""Code compressor (opt-in): keep imports, signatures, class and type declarations; drop function bodies.

Python is read by a logical-line scanner (strings, comments, brackets and continuations; about twice
as fast as ``ast``, see "Python without ast" below), with ``ast`` as the exact fallback whenever the
scanner is unsure: line ranges, decorators and multi-line signatures kept, the first line of each
docstring kept. Other languages go through a brace-matching heuristic: no tree-sitter wheel
is a dependency of the project, and signatures of the brace languages (C, Java, Go, Rust, JS/TS, C#, ...)
all end in ``{`` after a parenthesised parameter list, which is enough to find the bodies to drop.
When the braces do not balance the code is passed through rather than guessed at.
"""

from __future__ import annotations

import ast
import inspect
import keyword
import re

from shared.optimizer.outcome import CannotCompress

ELLIPSIS = "…"
LONG_STATEMENT_LINES = 4  # module- and class-level statements longer than this keep their first line only

_CONTROL_WORDS = frozenset(
    {"if", "else", "for", "foreach", "while", "switch", "catch", "try", "do", "return", "match", "loop",
     "finally", "with", "using", "lock", "synchronized", "unsafe", "select", "case", "defer", "go", "when",
     "elif", "until", "guard", "repeat", "static", "new", "throw", "yield", "await", "assert", "sizeof"}
)
_DOUBLE_QUOTED = re.compile(r'"(?:\\.|[^"\\])*"')
_BACKTICK = re.compile(r"`(?:\\.|[^`\\])*`")
_SINGLE_QUOTED = re.compile(r"'(?:\\.|[^'\\])*'")
_CHAR_LITERAL = re.compile(r"'(?:\\.[^']{0,8}|[^'\\])'")  # Rust lifetimes ('a) are not strings
_FIRST_WORD = re.compile(r"^\s*(?:[})\]]\s*)?([A-Za-z_]\w*)")
# Annotations and attributes in front of a signature: @Override, @Test(expected = X.class), #[test].
_LEADING_ATTRIBUTES = re.compile(r"^(?:\s*(?:@[\w.]+(?:\([^)]*\))?|#!?\[[^\]]*\]))+\s*")
_DECLARATION_WORDS = re.compile(
    r"\b(?:class|interface|struct|enum|trait|impl|object|record|namespace|module|union|extension|protocol)\b"
)


def compress_code(text: str, *, query: str | None = None, language: str | None = None) -> str:
    """Return the outline of ``text``: everything but function bodies. ``language`` is a detector label."""
    del query
    if language == "python":
        outline = _python_outline_scan(text)
        if outline is not None:
            return outline
    if language in (None, "python"):
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            if language == "python":
                raise CannotCompress("unparsable_python", str(exc).splitlines()[0]) from exc
        else:
            return _python_outline(text, tree)
    return _brace_outline(text, rust=language == "rust")


# --- Python ---------------------------------------------------------------------------------------


def _docstring_line(node: ast.AST, indent: str) -> list[str]:
    doc = ast.get_docstring(node, clean=True) if isinstance(
        node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module) else None
    if not doc:
        return []
    first = doc.strip().splitlines()[0].replace('"""', "'''")
    return [f'{indent}"""{first}"""']


def _python_outline(text: str, tree: ast.Module) -> str:
    lines = text.splitlines()
    # (first line, last line, replacement), 1-based and inclusive, never overlapping.
    edits: list[tuple[int, int, list[str]]] = []

    def indent_of(lineno: int) -> str:
        line = lines[lineno - 1]
        return line[: len(line) - len(line.lstrip())]

    def visit_body(body: list[ast.stmt], owner: ast.AST | None) -> None:
        start = 0
        if owner is not None and body and _is_docstring(body[0]):
            doc_node = body[0]
            if doc_node.end_lineno and doc_node.end_lineno > doc_node.lineno:
                edits.append((doc_node.lineno, doc_node.end_lineno, _docstring_line(owner, indent_of(doc_node.lineno))))
            start = 1
        for stmt in body[start:]:
            visit_stmt(stmt)

    def visit_stmt(stmt: ast.stmt) -> None:
        end = stmt.end_lineno or stmt.lineno
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            first = stmt.body[0]
            if first.lineno <= stmt.lineno:  # one-liner: def f(): return 1
                return
            indent = indent_of(first.lineno)
            edits.append((first.lineno, end, [*_docstring_line(stmt, indent), f"{indent}..."]))
        elif isinstance(stmt, ast.ClassDef):
            visit_body(stmt.body, stmt)
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            return
        elif isinstance(stmt, ast.If) and _is_type_checking(stmt.test):
            for inner in stmt.body:
                visit_stmt(inner)
        elif isinstance(stmt, ast.Try | ast.If | ast.For | ast.While | ast.With | ast.AsyncFor | ast.AsyncWith):
            body = stmt.body
            if end - stmt.lineno + 1 > LONG_STATEMENT_LINES and body and body[0].lineno > stmt.lineno:
                if isinstance(stmt, ast.Try) and all(isinstance(s, ast.Import | ast.ImportFrom) for s in body):
                    return  # optional-import blocks are imports
                indent = indent_of(body[0].lineno)
                edits.append((body[0].lineno, end, [f"{indent}..."]))
        elif end - stmt.lineno + 1 > LONG_STATEMENT_LINES and isinstance(stmt, ast.Assign | ast.AnnAssign):
            # A long literal (a table, a big dict): its name and type stay, the value goes; still valid Python.
            indent = indent_of(stmt.lineno)
            if isinstance(stmt, ast.Assign):
                head = " = ".join(ast.unparse(target) for target in stmt.targets)
            else:
                head = f"{ast.unparse(stmt.target)}: {ast.unparse(stmt.annotation)}"
            edits.append((stmt.lineno, end, [f"{indent}{head} = ...  # {end - stmt.lineno + 1} lines"]))

    module_doc = tree.body[0] if tree.body and _is_docstring(tree.body[0]) else None
    if module_doc is not None and (module_doc.end_lineno or 0) > module_doc.lineno:
        edits.append((module_doc.lineno, module_doc.end_lineno or module_doc.lineno, _docstring_line(tree, "")))
    for stmt in tree.body[1:] if module_doc is not None else tree.body:
        visit_stmt(stmt)

    out: list[str] = []
    position = 1
    for first, last, replacement in sorted(edits):
        if first < position:
            continue
        out.extend(lines[position - 1 : first - 1])
        out.extend(replacement)
        position = last + 1
    out.extend(lines[position - 1 :])
    return "\n".join(_squeeze_blank_lines(out))


def _is_docstring(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _squeeze_blank_lines(lines: list[str]) -> list[str]:
    out: list[str] = []
    for line in lines:
        if not line.strip() and out and not out[-1].strip():
            continue
        out.append(line.rstrip())
    return out


# --- Python without ast ----------------------------------------------------------------------------
#
# ``ast.parse`` builds an object for every node of every body, only for the outline to throw the bodies
# away: it was about 80 % of the compressor's time. This scanner finds the logical lines (strings,
# comments, brackets and backslash continuations followed by one regular expression) and builds the
# same outline from their indentation. Whatever it is not sure of (tabs, an unterminated string or
# bracket, a form feed) makes it give up, and the ``ast`` outline is used instead.

# Every alternative starts with one of a few characters, so the engine skips plain code at C speed. A string
# prefix (r, b, f) is left in the code before the quote; brackets are counted in that code.
_PY_SCAN = re.compile(
    r"(?=[\"'#\\\n])(?:"  # a leading class lets the engine skip to candidates
    r"(?P<tq>\"\"\"|''')"
    r"|(?P<sq>\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*')"
    r"|(?P<comment>#[^\n]*)"
    r"|(?P<cont>\\\r?\n)"
    r"|(?P<nl>\n))"
)
_TQ_END = {
    '"""': re.compile(r'(?:\\.|[^\\])*?"""', re.S),
    "'''": re.compile(r"(?:\\.|[^\\])*?'''", re.S),
}
_PY_FIRST_WORD = re.compile(r"[ ]*(async[ ]+def|async[ ]+for|async[ ]+with|[A-Za-z_]\w*|@)")
_PY_CLAUSES = frozenset({"elif", "else", "except", "finally"})
_PY_COMPOUND = frozenset({"if", "for", "while", "with", "try", "match", "async for", "async with"})
_PY_ASSIGN_HEAD = re.compile(r"^([ ]*[A-Za-z_][\w.]*(?:[ ]*:[ ]*[^=]+?)?)[ ]*=(?!=)")
_DOC_LITERAL = re.compile(r"^[rRuU]?(\"\"\"|'''|\"|')(.*)\1$", re.S)


class _Logical:
    """One logical line of Python source: physical lines ``first``..``last`` (0-based, inclusive)."""

    __slots__ = ("first", "last", "indent", "head", "colon", "doc", "_word")

    def __init__(self, first: int, last: int, head: str, colon: bool, doc: str | None) -> None:
        self.first, self.last, self.head, self.colon, self.doc = first, last, head, colon, doc
        self.indent = len(head) - len(head.lstrip(" "))
        self._word: str | None = None

    @property
    def word(self) -> str:
        """The statement's first word (``def``, ``async def``, ``class``, ``@``, a name), computed when asked:
        bodies that are dropped never need it."""
        if self._word is None:
            match = _PY_FIRST_WORD.match(self.head)
            self._word = " ".join(match.group(1).split()) if match else ""
        return self._word


def _scan_python(text: str, lines: list[str]) -> list[_Logical] | None:
    """The logical lines of ``text`` with code in them, or None when the scanner is not sure."""
    if "\t" in text or "\f" in text or "\r" in text.replace("\r\n", ""):
        return None
    logical: list[_Logical] = []
    search = _PY_SCAN.search
    depth = 0
    line = 0
    position = 0
    start = -1  # physical line where the current logical line began (-1: no code yet)
    literal: str | None = None  # the only thing in the logical line so far is this string literal
    other = False  # the logical line has code other than that literal
    code_end = 0  # offset just after the last code of the current logical line

    def close(end_line: int) -> None:
        logical.append(_Logical(start, end_line, lines[start], text[code_end - 1] == ":", None if other else literal))

    while True:
        match = search(text, position)
        gap_end = match.start() if match else len(text)
        if position < gap_end:
            gap = text[position:gap_end]
            if gap.strip():
                if start < 0:
                    start = line
                other = True
                code_end = position + len(gap.rstrip())
                depth += gap.count("(") + gap.count("[") + gap.count("{") - gap.count(")") - gap.count("]") - gap.count("}")
                if depth < 0:
                    return None
        if match is None:
            break
        kind = match.lastgroup
        position = match.end()
        if kind == "nl":
            if depth == 0 and start >= 0:
                close(line)
                start, literal, other = -1, None, False
            line += 1
            continue
        if kind == "cont":
            line += 1
            continue
        if kind == "comment":
            continue
        if start < 0:
            start = line
        if kind == "tq":
            end = _TQ_END[match.group(0)[-3:]].match(text, position)
            if end is None:
                return None
            line += text.count("\n", position, end.end())
            token = text[match.start() : end.end()]
            position = end.end()
        else:
            token = match.group(0)
        if literal is None and not other:
            literal = token
        else:
            other = True
        code_end = position
    if depth != 0:
        return None
    if start >= 0:
        close(line)
    return logical


def _doc_first_line(literal: str | None, indent: str) -> list[str]:
    if literal is None:
        return []
    match = _DOC_LITERAL.match(literal)
    if match is None:
        return []
    doc = inspect.cleandoc(match.group(2)).strip()
    if not doc:
        return []
    first = doc.splitlines()[0].replace('"""', "'''")
    return [f'{indent}"""{first}"""']


def _python_outline_scan(text: str) -> str | None:
    """The outline of :func:`_python_outline` from logical lines, or None to let ``ast`` do it."""
    lines = text.split("\n")
    statements = _scan_python(text, lines)
    if statements is None:
        return None
    count = len(statements)
    edits: list[tuple[int, int, list[str]]] = []  # 0-based first line, last line, replacement

    def block_end(index: int) -> int:
        """Index after the last statement of the body that starts after ``statements[index]``."""
        indent = statements[index].indent
        end = index + 1
        while end < count and statements[end].indent > indent:
            end += 1
        return end

    def body_indent(index: int) -> str:
        return " " * statements[index].indent

    def visit(begin: int, end: int, owner: bool) -> None:
        index = begin
        if owner and index < end and statements[index].doc is not None:
            doc = statements[index]
            if doc.last > doc.first:
                edits.append((doc.first, doc.last, _doc_first_line(doc.doc, body_indent(index))))
            index += 1
        while index < end:
            statement = statements[index]
            word = statement.word
            after = block_end(index) if statement.colon else index + 1
            if word in {"def", "async def"} and statement.colon:
                if after > index + 1:
                    first_body = statements[index + 1]
                    indent = body_indent(index + 1)
                    edits.append((first_body.first, statements[after - 1].last,
                                  [*_doc_first_line(first_body.doc, indent), f"{indent}..."]))
            elif word == "class" and statement.colon:
                visit(index + 1, after, True)
            elif word == "if" and statement.colon and "TYPE_CHECKING" in lines[statement.first]:
                visit(index + 1, after, False)
            elif word in _PY_COMPOUND and statement.colon:
                # The statement with its clauses (else, except, finally at the same indentation).
                clauses = [index]
                while (after < end and statements[after].indent == statement.indent
                       and statements[after].word in _PY_CLAUSES and statements[after].colon):
                    clauses.append(after)
                    after = block_end(after)
                total = statements[after - 1].last - statement.first + 1
                bodies = [(head, block_end(head)) for head in clauses]
                only_imports = word == "try" and all(
                    statements[i].word in {"import", "from"} for i in range(index + 1, bodies[0][1]))
                if total > LONG_STATEMENT_LINES and not only_imports:
                    for head, stop in bodies:
                        if stop > head + 1:
                            indent = body_indent(head + 1)
                            edits.append((statements[head + 1].first, statements[stop - 1].last, [f"{indent}..."]))
            elif not statement.colon and statement.last - statement.first + 1 > LONG_STATEMENT_LINES:
                head = _PY_ASSIGN_HEAD.match(lines[statement.first])
                if head and not keyword.iskeyword(word):
                    size = statement.last - statement.first + 1
                    edits.append((statement.first, statement.last, [f"{head.group(1).rstrip()} = ...  # {size} lines"]))
            index = after

    visit(0, count, True)
    out: list[str] = []
    position = 0
    for first, last, replacement in sorted(edits):
        if first < position:
            continue
        out.extend(lines[position:first])
        out.extend(replacement)
        position = last + 1
    out.extend(lines[position:])
    return "\n".join(_squeeze_blank_lines(out)).rstrip("\n")


# --- brace languages -------------------------------------------------------------------------------


def _code_only(line: str, in_block_comment: bool, rust: bool) -> tuple[str, bool]:
    """The line without string literals and comments (so their braces do not count), and the comment state."""
    out: list[str] = []
    i = 0
    if in_block_comment:
        end = line.find("*/")
        if end < 0:
            return "", True
        i = end + 2
    rest = line[i:]
    rest = _DOUBLE_QUOTED.sub('""', rest)
    rest = _BACKTICK.sub("``", rest)
    rest = (_CHAR_LITERAL if rust else _SINGLE_QUOTED).sub("''", rest)
    while rest:
        line_comment = rest.find("//")
        block = rest.find("/*")
        if line_comment >= 0 and (block < 0 or line_comment < block):
            out.append(rest[:line_comment])
            return "".join(out), False
        if block >= 0:
            out.append(rest[:block])
            end = rest.find("*/", block + 2)
            if end < 0:
                return "".join(out), True
            rest = rest[end + 2 :]
            continue
        out.append(rest)
        break
    return "".join(out), False


def _is_signature(statement: str) -> bool:
    """A statement (code only, joined over its lines) that opens a function body."""
    head = statement.rstrip()
    if not head.endswith("{"):
        return False
    head = _LEADING_ATTRIBUTES.sub("", head[:-1].rstrip())
    if "(" not in head or ")" not in head:
        return False
    if _DECLARATION_WORDS.search(head[: head.index("(")]):
        return False  # a class or type declaration keeps its members; their bodies go one by one
    match = _FIRST_WORD.match(head)
    if match is None or match.group(1) in _CONTROL_WORDS:
        return False
    # "x = foo(...) {" is an initialiser, unless it is an arrow function or a function expression.
    before_paren = head[: head.index("(")]
    return "=" not in before_paren or "=>" in head or "function" in before_paren or before_paren.rstrip().endswith("=")


def _brace_outline(text: str, *, rust: bool) -> str:
    lines = text.splitlines()
    out: list[str] = []
    depth = 0
    in_comment = False
    statement = ""  # code of the current statement, joined over lines, for multi-line signatures
    index = 0
    found = 0
    while index < len(lines):
        line = lines[index]
        code, in_comment = _code_only(line, in_comment, rust)
        stripped = code.strip()
        if stripped:
            statement = f"{statement} {stripped}" if statement else stripped
        opens_body = stripped.endswith("{") and _is_signature(statement)
        depth += code.count("{") - code.count("}")
        if depth < 0:
            raise CannotCompress("unbalanced_braces", f"closing brace without opening at line {index + 1}")
        if not stripped or stripped.endswith(("{", "}", ";")):
            statement = ""
        if not opens_body:
            out.append(line.rstrip())
            index += 1
            continue
        # Skip to the line where this body closes; keep what follows the closing brace.
        target = depth - 1
        inner = index + 1
        closing_tail = None
        while inner < len(lines):
            inner_code, in_comment = _code_only(lines[inner], in_comment, rust)
            for position, char in enumerate(inner_code):
                if char == "{":
                    depth += 1
                elif char == "}":
                    depth -= 1
                    if depth == target:
                        closing_tail = inner_code[position + 1 :]
                        depth += inner_code[position + 1 :].count("{") - inner_code[position + 1 :].count("}")
                        break
            if closing_tail is not None:
                break
            inner += 1
        if closing_tail is None:
            raise CannotCompress("unbalanced_braces", f"body opened at line {index + 1} never closes")
        body_lines = inner - index - 1
        if body_lines <= 0:
            out.append(line.rstrip())
            out.append(lines[inner].rstrip())
        else:
            found += 1
            out.append(f"{line.rstrip()} {ELLIPSIS} }}{closing_tail.rstrip()}")
        index = inner + 1
        statement = ""
    if depth != 0:
        raise CannotCompress("unbalanced_braces", "braces do not balance")
    if found == 0:
        raise CannotCompress("no_bodies", "no function bodies found")
    return "\n".join(_squeeze_blank_lines(out))
