"""Build known-item datasets of alert names for ``mem eval``: does an alert name find its runbook?

    python bench/alert_names.py [--data ../shared/data] [--out /tmp/alert-names]
    mem eval --dataset /tmp/alert-names/words --methods lexical,semantic,hybrid,auto

The OpenShift and kube-prometheus runbooks in ``--data`` (read only) are copied into three folders under
``--out``, each with its own ``queries.jsonl`` and ``qrels.tsv``. Every runbook whose file name is a
CamelCase alert name (``KubePodCrashLooping.md``) gets one query per folder, judging that file relevant:

- ``whole``: the name as written (``KubePodCrashLooping``);
- ``words``: its words, lower case (``kube pod crash looping``), as someone who half-remembers it types;
- ``typo``: the name with one letter dropped from its middle (``KubePodCrashLoping``).

The three folders hold the same markdown files, so ``mem eval`` ingests the corpus once (its cache key
is the hash of the documents) and reuses it for the other two.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CAMEL = re.compile(r"^[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+$")
SOURCES = ("vaults/openshift-runbooks/alerts", "vaults/prometheus-operator-runbooks/content/runbooks")


def words_of(name: str) -> str:
    """``KubePodCrashLooping`` -> ``kube pod crash looping``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name)
    return spaced.lower()


def typo_of(name: str) -> str:
    """Drop one lower-case letter near the middle (deterministic)."""
    middle = len(name) // 2
    for offset in range(len(name)):
        for i in (middle + offset, middle - offset):
            if 0 < i < len(name) - 1 and name[i].islower():
                return name[:i] + name[i + 1 :]
    return name[:-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--out", default="/tmp/alert-names")
    args = parser.parse_args()
    data, out = Path(args.data), Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    files: list[Path] = []
    for source in SOURCES:
        root = data / source
        for path in sorted(root.rglob("*.md")):
            rel = Path(source.split("/")[1]) / path.relative_to(root)
            target = out / ".corpus" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            files.append(rel)
    kinds = {"whole": lambda n: n, "words": words_of, "typo": typo_of}
    names: dict[str, Path] = {}
    for rel in files:
        if CAMEL.match(rel.stem) and rel.stem not in names:
            names[rel.stem] = rel
    corpus = out / ".corpus"
    for kind, make in kinds.items():
        folder = out / kind
        shutil.copytree(corpus, folder)
        with (folder / "queries.jsonl").open("w") as stream:
            for name in names:
                stream.write(json.dumps({"_id": f"{name}-{kind}", "text": make(name)}) + "\n")
        with (folder / "qrels.tsv").open("w") as stream:
            stream.write("query-id\tcorpus-id\tscore\n")
            for name, rel in names.items():
                stream.write(f"{name}-{kind}\t{rel.as_posix()}\t1\n")
    shutil.rmtree(corpus)
    print(f"{len(files)} documents, {len(names)} alert names; datasets: "
          + ", ".join(str(out / kind) for kind in kinds))


if __name__ == "__main__":
    main()
