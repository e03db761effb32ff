"""Benchmark failure signatures on real CI logs (LogChunks, Treeherder, CiDiff) and print the numbers.

    .venv/bin/python bench/diagnosis.py [--data ../shared/data] [--limit N] [--only logchunks,speed] [--misses 20]
                                        [--half tune|test]

Reads ``<data>/logs`` (see its README and each folder's SOURCE.txt); nothing is written. Sections:

- logchunks: share of the 797 failed Travis logs whose ``matched_line`` falls inside the labelled
  failure chunk, and share where the matched line or any ``errors`` line does; for the whole set and
  for its two halves (split by repository, see :func:`logchunks_half`): rules are tuned looking at
  the misses of the "tune" half only, the "test" half shows whether they generalise;
- treeherder: recall and precision of ``errors`` (plus the matched line) against the expected error
  lines, and share of logs whose matched line is an expected one;
- cidiff: share of Maven breakages whose matched line is inside a ground-truth error range;
- stability: every log again with run noise injected (timestamps shifted, temp dirs renamed, SHAs,
  durations and PIDs changed), counting unchanged ``sig_sha``; and LogChunks signature collisions;
- speed: median and p95 ms per log, ms per 50 KB, and a 50 MB log streamed from disk.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import hashlib
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from shared.diagnosis import Signature, extract_signature  # noqa: E402
from shared.diagnosis.lines import split_line  # noqa: E402
from shared.noise import strip_ansi  # noqa: E402

SECTIONS = ("logchunks", "treeherder", "cidiff", "stability", "speed")


def read_log(path: Path) -> str:
    """A log file as text (gunzipped when it ends in .gz, bad bytes replaced)."""
    if path.suffix == ".gz":
        with gzip.open(path) as stream:
            data = stream.read()
    else:
        data = path.read_bytes()
    return data.decode("utf-8", errors="replace")


def predicted_lines(sig: Signature) -> set[int]:
    """The matched line plus every listed error line."""
    lines = {e.line for e in sig.errors}
    if sig.matched_line:
        lines.add(sig.matched_line)
    return lines


# --- LogChunks ------------------------------------------------------------------------------------

def _sublines(text: str) -> list[tuple[str, int]]:
    """Non-blank visible pieces of the log (split on \\n and \\r) with their 1-based \\n line number."""
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        for piece in line.split("\r"):
            piece = strip_ansi(piece).replace("\x1b", "").strip()
            if piece:
                out.append((piece, number))
    return out


def locate_chunk(text: str, chunk: str) -> tuple[int, int] | None:
    """(first, last) 1-based log lines of the labelled chunk (labels turned \\r into \\n, so compare pieces)."""
    wanted = [p for p in (strip_ansi(x).replace("\x1b", "").strip() for x in chunk.replace("\r", "\n").split("\n")) if p]
    if not wanted:
        return None
    pieces = _sublines(text)
    texts = [p for p, _ in pieces]
    n = len(wanted)
    for exact in (True, False):
        for i in range(len(texts) - n + 1):
            if exact and texts[i] == wanted[0] and texts[i : i + n] == wanted:
                return pieces[i][1], pieces[i + n - 1][1]
            if not exact and wanted[0] in texts[i] and all(wanted[k] in texts[i + k] for k in range(n)):
                return pieces[i][1], pieces[i + n - 1][1]
    return None


HALVES = ("tune", "test")


def logchunks_half(repo: str) -> str:
    """The half of LogChunks a repository belongs to: "tune" or "test".

    By repository, so that one repository's (often identical) builds all land in the same half and
    a rule tuned on one build cannot be credited on its twin; by a hash, so the split is fixed.
    """
    return HALVES[hashlib.sha256(repo.encode()).digest()[0] % 2]


def bench_logchunks(data: Path, limit: int | None, misses: int, half: str | None = None) -> dict[str, object]:
    root = data / "logs" / "logchunks"
    rows = [json.loads(line) for line in (root / "labels.jsonl").read_text().splitlines() if line.strip()]
    if limit:
        rows = rows[:limit]
    # [located, matched line inside, any line inside] per half
    counts: dict[str, list[int]] = {h: [0, 0, 0] for h in HALVES}
    found = 0
    by_category: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    shown = 0
    sigs: list[tuple[str, Signature]] = []
    for row in rows:
        row_half = logchunks_half(row["repo"])
        if half is not None and row_half != half:
            continue
        text = read_log(root / row["log"])
        span = locate_chunk(text, row["chunk"])
        sig = extract_signature(text)
        sigs.append((row["log"], sig))
        if span is None:
            continue
        found += sig.found
        first, last = span
        in_matched = sig.matched_line is not None and first <= sig.matched_line <= last
        in_any = any(first <= n <= last for n in predicted_lines(sig))
        counts[row_half][0] += 1
        counts[row_half][1] += in_matched
        counts[row_half][2] += in_any
        by_category[row["category"]][0] += in_matched
        by_category[row["category"]][1] += 1
        if not in_matched and shown < misses:
            shown += 1
            lines = text.split("\n")
            print(f"  MISS {row['log']} chunk={first}-{last} matched={sig.matched_line} rule={sig.rule}"
                  f" any={'yes' if in_any else 'no'}")
            for n in range(first, min(last, first + 2) + 1):
                print(f"       chunk: {strip_ansi(lines[n - 1]).strip()[:150]!r}")
            if sig.matched_line:
                print(f"       got:   {strip_ansi(lines[sig.matched_line - 1]).strip()[:150]!r}")
    located = sum(c[0] for c in counts.values())
    result: dict[str, object] = {
        "logs": len(sigs),
        "chunks_located": located,
        "found": found,
        "matched_line_in_chunk": sum(c[1] for c in counts.values()) / located if located else 0.0,
        "any_line_in_chunk": sum(c[2] for c in counts.values()) / located if located else 0.0,
    }
    for name, (n, matched, any_line) in counts.items():
        if n:
            result[f"{name}_half"] = f"{n} logs: matched {matched / n:.3f}, any {any_line / n:.3f}"
    result["by_category"] = {k: f"{v[0]}/{v[1]}" for k, v in sorted(by_category.items())}
    result["_sigs"] = sigs
    return result


# --- Treeherder -----------------------------------------------------------------------------------

def bench_treeherder(data: Path, limit: int | None, misses: int) -> dict[str, object]:
    root = data / "logs" / "treeherder" / "tests" / "sample_data" / "logs"
    views = sorted(root.glob("*.logview.json"))[: limit or None]
    tp = n_pred = n_exp = matched_ok = logs = 0
    per_log = []
    for view in views:
        log = root / view.name.replace(".logview.json", ".log.gz")
        if not log.exists():
            continue
        # Treeherder reads logs with universal newlines (a lone \r ends a line too) and numbers them
        # from 0; its expected text lacks the Taskcluster "[task <ts>] " prefix. Feed the same lines.
        lines = re.split(r"\r\n|\r|\n", read_log(log))
        expected: set[int] = set()
        for err in json.loads(view.read_text())["errors"]:
            n = err["linenumber"]
            want = err["line"].strip()
            # One fixture is off by one (see SOURCE.txt): check the text.
            for candidate in (n + 1, n):
                if 0 < candidate <= len(lines) and want in lines[candidate - 1]:
                    expected.add(candidate)
                    break
            else:
                expected.add(n + 1)
        sig = extract_signature(lines)
        predicted = predicted_lines(sig)
        hits = len(predicted & expected)
        tp += hits
        n_pred += len(predicted)
        n_exp += len(expected)
        logs += 1
        matched_ok += sig.matched_line in expected
        per_log.append(f"{view.name.replace('.logview.json', '')}: {hits}/{len(expected)} expected, {len(predicted)} predicted, "
                       f"matched {'ok' if sig.matched_line in expected else 'MISS'} ({sig.rule})")
    if misses:
        for line in per_log:
            print("  " + line)
    return {
        "logs": logs,
        "expected_lines": n_exp,
        "recall": tp / n_exp if n_exp else 0.0,
        "precision": tp / n_pred if n_pred else 0.0,
        "matched_line_expected": matched_ok / logs if logs else 0.0,
    }


# --- CiDiff ---------------------------------------------------------------------------------------

def bench_cidiff(data: Path, limit: int | None, misses: int) -> dict[str, object]:
    root = data / "logs" / "cidiff"
    cases = sorted(p for p in root.iterdir() if (p / "groundtruth").exists())[: limit or None]
    hit = hit_any = 0
    shown = 0
    for case in cases:
        ranges = []
        for line in (case / "groundtruth").read_text().splitlines()[1:]:
            kind, _, span = line.strip().partition(" ")
            if kind != "E":
                continue
            first, _, last = span.partition("-")
            ranges.append((int(first), int(last or first)))
        # CiDiff numbers lines like Java's readLine(): \r, \n and \r\n all end a line. Feed the same lines.
        lines = re.split(r"\r\n|\r|\n", read_log(case / "fail.log"))
        sig = extract_signature(lines)
        inside = sig.matched_line is not None and any(a <= sig.matched_line <= b for a, b in ranges)
        hit += inside
        hit_any += any(a <= n <= b for n in predicted_lines(sig) for a, b in ranges)
        if not inside and shown < misses:
            shown += 1
            got = lines[sig.matched_line - 1].strip()[:140] if sig.matched_line else None
            want = lines[ranges[0][0] - 1].strip()[:140] if ranges else None
            print(f"  MISS {case.name}: matched={sig.matched_line} ({sig.rule}) {got!r}\n       truth {ranges[:3]} {want!r}")
    return {"breakages": len(cases), "matched_line_in_error_range": hit / len(cases) if cases else 0.0,
            "any_line_in_error_range": hit_any / len(cases) if cases else 0.0}


# --- stability ------------------------------------------------------------------------------------

_ISO_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z?")
_TIME_RE = re.compile(r"(?<![\d:.])(\d\d):(\d\d):(\d\d)(?![\d:])")
_TMP_RE = re.compile(r"/tmp/[\w.-]+")
_SHA_RE = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
_DURATION_RE = re.compile(r"\b(\d+(?:\.\d+)?)(ms|s)\b")
_PID_RE = re.compile(r"\b(pid|PID|process)([ =:]+)(\d+)\b")


def inject_run_noise(text: str, seed: int) -> str:
    """The same log as a second run would print it: other times, temp dirs, SHAs, durations, PIDs.

    Written independently of :mod:`shared.noise` (it must not share its regexes, or the test would
    only prove that a pattern matches itself).
    """
    rng = random.Random(seed)
    shift = dt.timedelta(hours=rng.randint(1, 30), minutes=rng.randint(0, 59), seconds=rng.randint(0, 59))

    def iso(m: re.Match[str]) -> str:
        raw = m.group()
        frac = raw.split(".")[1].rstrip("Z") if "." in raw else ""
        moment = dt.datetime.strptime(raw[:19], "%Y-%m-%dT%H:%M:%S") + shift
        new_frac = "".join(rng.choice("0123456789") for _ in frac)
        return moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{new_frac}" if frac else "") + ("Z" if raw.endswith("Z") else "")

    def tod(m: re.Match[str]) -> str:
        h, mi, s = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if h > 23 or mi > 59 or s > 59:
            return m.group()
        total = (h * 3600 + mi * 60 + s + int(shift.total_seconds())) % 86400
        return f"{total // 3600:02d}:{total // 60 % 60:02d}:{total % 60:02d}"

    text = _ISO_RE.sub(iso, text)
    text = _TIME_RE.sub(tod, text)
    text = _TMP_RE.sub(lambda m: "/tmp/" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(10)), text)
    text = _SHA_RE.sub(lambda m: "".join(rng.choice("0123456789abcdef") for _ in m.group()).replace("0", "a", 1) + "", text)
    text = _DURATION_RE.sub(lambda m: f"{rng.randint(1, 999)}.{rng.randint(0, 99):02d}{m.group(2)}", text)
    text = _PID_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{rng.randint(100, 99999)}", text)
    return text


def bench_stability(data: Path, limit: int | None, misses: int, logchunk_sigs: list[tuple[str, Signature]]) -> dict[str, object]:
    logs: list[Path] = []
    chunks = data / "logs" / "logchunks"
    logs += [chunks / json.loads(line)["log"] for line in (chunks / "labels.jsonl").read_text().splitlines() if line.strip()]
    logs += sorted((data / "logs" / "treeherder" / "tests" / "sample_data" / "logs").glob("*.log.gz"))
    logs += sorted((data / "logs" / "cidiff").glob("*/fail.log"))
    if limit:
        logs = logs[:limit]
    same = changed = 0
    shown = 0
    for i, path in enumerate(logs):
        text = read_log(path)
        a = extract_signature(text)
        b = extract_signature(inject_run_noise(text, seed=i))
        if a.sig_sha == b.sig_sha and a.found == b.found:
            same += 1
        else:
            changed += 1
            if shown < misses:
                shown += 1
                print(f"  CHANGED {path.name}: {a.normalised!r} (line {a.matched_line})\n          {b.normalised!r} (line {b.matched_line})")
    # Collisions between different LogChunks logs: same sig_sha although the raw bodies differ.
    groups: dict[str, list[tuple[str, Signature]]] = defaultdict(list)
    for name, sig in logchunk_sigs:
        if sig.sig_sha:
            groups[sig.sig_sha].append((name, sig))
    shared = [g for g in groups.values() if len(g) > 1]
    collapsed = []
    for group in shared:
        # Compare what the log shows (no ANSI, no CI prefix, last \r overwrite), spaces collapsed.
        bodies = {re.sub(r"\s+", " ", split_line(s.raw or "")[1]).strip() for _, s in group}
        if len(bodies) > 1:
            collapsed.append((group[0][1].normalised, sorted(bodies)[:3], len(group)))
    for normalised, bodies, size in collapsed[:misses]:
        print(f"  SHARED by {size} logs: {normalised!r}")
        for body in bodies:
            print(f"      raw: {body[:140]!r}")
    return {
        "logs": len(logs),
        "sig_sha_unchanged": same / len(logs) if logs else 0.0,
        "changed": changed,
        "logchunks_distinct_signatures": len(groups),
        "signatures_shared_by_several_logs": len(shared),
        "shared_with_different_raw_lines": len(collapsed),
    }


# --- speed ----------------------------------------------------------------------------------------

def bench_speed(data: Path, limit: int | None) -> dict[str, object]:
    """Per-log time, as CPU time of this process (robust on a shared, loaded machine) and wall time."""
    paths = [p for p in sorted((data / "logs").rglob("*")) if p.is_file() and p.name.endswith((".log", ".log.gz"))]
    if limit:
        paths = paths[:limit]
    per_log: list[float] = []
    per_log_wall: list[float] = []
    per_50k: list[float] = []
    total_bytes = 0
    total_ms = 0.0
    for path in paths:
        text = read_log(path)
        wall = time.perf_counter()
        start = time.process_time()
        extract_signature(text)
        ms = (time.process_time() - start) * 1000
        per_log_wall.append((time.perf_counter() - wall) * 1000)
        per_log.append(ms)
        total_ms += ms
        total_bytes += len(text.encode("utf-8"))
        head = text[:50_000]
        if len(head) == 50_000:
            runs = []
            for _ in range(3):
                start = time.process_time()
                extract_signature(head)
                runs.append((time.process_time() - start) * 1000)
            per_50k.append(min(runs))
    per_log.sort()
    per_log_wall.sort()
    per_50k.sort()

    # 50 MB streamed from disk in a fresh process: its peak RSS against a process that only imports.
    with tempfile.NamedTemporaryFile(suffix=".log") as tmp:
        pieces = [read_log(p).encode("utf-8") for p in paths[:40]]
        written = 0
        while written < 50_000_000:
            for piece in pieces:
                tmp.write(piece)
                written += len(piece)
        tmp.flush()
        big = _run_streaming(tmp.name, extract=True)
        base = _run_streaming(tmp.name, extract=False)
    return {
        "logs": len(per_log),
        "median_ms_per_log": statistics.median(per_log),
        "p95_ms_per_log": per_log[int(0.95 * (len(per_log) - 1))],
        "median_wall_ms_per_log": statistics.median(per_log_wall),
        "ms_per_50kb_overall": total_ms / (total_bytes / 50_000),
        "median_ms_first_50kb": statistics.median(per_50k) if per_50k else None,
        "p95_ms_first_50kb": per_50k[int(0.95 * (len(per_50k) - 1))] if per_50k else None,
        "stream_mb": written / 1e6,
        "stream_cpu_secs": big["cpu"],
        "stream_ms_per_50kb": big["cpu"] * 1000 / (written / 50_000),
        "stream_lines": big["lines"],
        "stream_max_rss_mb": big["rss_kb"] / 1024,
        "import_only_max_rss_mb": base["rss_kb"] / 1024,
    }


_STREAM_CODE = """
import json, resource, sys, time
from shared.diagnosis import extract_signature
from shared.diagnosis.lines import iter_lines
start = time.process_time()
lines = 0
if sys.argv[2] == "1":
    with open(sys.argv[1], "rb") as stream:
        lines = extract_signature(iter_lines(stream)).lines_read
# VmHWM is this process's own peak (ru_maxrss can carry the parent's peak across fork and exec).
try:
    rss_kb = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
except OSError:
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"cpu": time.process_time() - start, "lines": lines, "rss_kb": rss_kb}))
"""


def _run_streaming(path: str, *, extract: bool) -> dict[str, float]:
    """Run the extractor over ``path`` in a fresh interpreter; its CPU time, lines and peak RSS."""
    result = subprocess.run(
        [sys.executable, "-c", _STREAM_CODE, path, "1" if extract else "0"],
        cwd=REPO, capture_output=True, text=True, check=True,
    )
    return json.loads(result.stdout)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data", help="evaluation data (default ../shared/data)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N logs of each set")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections: {','.join(SECTIONS)}")
    parser.add_argument("--misses", type=int, default=0, help="print up to N misses per section")
    parser.add_argument("--half", choices=HALVES, default=None,
                        help="LogChunks: only one half (split by repository); iterate on 'tune', check on 'test'")
    args = parser.parse_args(argv)
    if not (args.data / "logs").is_dir():
        print(f"no evaluation data at {args.data}/logs (pass --data)", file=sys.stderr)
        return 2
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    unknown = only - set(SECTIONS)
    if unknown:
        print(f"unknown sections {sorted(unknown)}; known: {', '.join(SECTIONS)}", file=sys.stderr)
        return 2
    results: dict[str, dict[str, object]] = {}
    chunk_sigs: list[tuple[str, Signature]] = []
    if "logchunks" in only or "stability" in only:
        res = bench_logchunks(args.data, args.limit, args.misses if "logchunks" in only else 0, args.half)
        chunk_sigs = res.pop("_sigs")  # type: ignore[assignment]
        if "logchunks" in only:
            results["logchunks"] = res
    if "treeherder" in only:
        results["treeherder"] = bench_treeherder(args.data, args.limit, args.misses)
    if "cidiff" in only:
        results["cidiff"] = bench_cidiff(args.data, args.limit, args.misses)
    if "stability" in only:
        results["stability"] = bench_stability(args.data, args.limit, args.misses, chunk_sigs)
    if "speed" in only:
        results["speed"] = bench_speed(args.data, args.limit)
    for section, numbers in results.items():
        print(f"[{section}]")
        for key, value in numbers.items():
            print(f"  {key}: {_fmt(value)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
