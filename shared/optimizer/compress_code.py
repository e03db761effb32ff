"""Code compressor (opt-in): keep imports, signatures, class and type declarations; drop function bodies.

Python is read with ``ast`` (exact line ranges, decorators and multi-line signatures kept, the first
line of each docstring kept). Other languages go through a brace-matching heuristic: no tree-sitter wheel
is a dependency of the project, and signatures of the brace languages (C, Java, Go, Rust, JS/TS, C#, ...)
all end in ``{`` after a parenthesised parameter list, which is enough to find the bodies to drop.
When the braces do not balance the code is passed through rather than guessed at.
"""

from __future__ import annotations

import ast
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
