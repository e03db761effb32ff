"""``mem eval``: dataset readers, metrics through ranx, and the command end to end on tiny fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from shared.evaluation.datasets import DatasetError, beir_markdown, load_dataset
from shared.evaluation.metrics import ir_metrics, percentile
from shared.evaluation.runner import method_specs

FIXTURES = Path(__file__).parent / "fixtures" / "query"
BEIR = FIXTURES / "beir-mini"
VAULT = FIXTURES / "vault"


def test_beir_reader_keeps_judged_queries_and_positive_grades() -> None:
    ds = load_dataset(BEIR, "test")
    assert ds.kind == "beir" and ds.split == "test"
    assert set(ds.queries) == {"q1", "q2", "q3", "q4"}  # q5 has no judgement
    assert ds.qrels["q4"] == {"d2": 1}  # the zero grade is not a relevant document
    assert ds.qrels["q3"] == {"d5": 2}
    assert ds.doc_paths["d1.md"] == "d1"
    docs = dict(ds.documents())
    assert docs["d1.md"].startswith("# Sourdough starters\n\nA sourdough starter")
    assert docs["d7.md"].startswith("Knead the dough")  # no title, no heading
    assert "d8.md" not in docs  # nothing to index
    assert len(ds.corpus_sha) == 64 and ds.corpus_sha == load_dataset(BEIR, "test").corpus_sha


def test_markdown_folder_reader_uses_relative_paths_as_ids() -> None:
    ds = load_dataset(VAULT)
    assert ds.kind == "markdown"
    assert ds.qrels["v1"] == {"runbooks/pod-crashlooping.md": 2}
    assert "skills/rollback-deployment.md" in ds.doc_paths
    assert beir_markdown("  A   title\n", " body ") == "# A title\n\nbody\n"


def test_bad_datasets_give_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset(tmp_path / "missing")
    with pytest.raises(DatasetError, match="neither a BEIR folder"):
        load_dataset(tmp_path)
    with pytest.raises(DatasetError, match="no qrels/dev.tsv"):
        load_dataset(BEIR, "dev")
    broken = tmp_path / "broken"
    (broken / "qrels").mkdir(parents=True)
    (broken / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n')
    (broken / "queries.jsonl").write_text('{"_id": "q1", "text": "x"}\n{"_id": "q2", "text": \n')
    (broken / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    with pytest.raises(DatasetError, match="queries.jsonl line 2: not JSON"):
        load_dataset(broken)
    (broken / "queries.jsonl").write_text('{"_id": "q9", "text": "x"}\n')
    with pytest.raises(DatasetError, match="not in queries.jsonl"):
        load_dataset(broken)
    (broken / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq9\td1\tlots\n")
    with pytest.raises(DatasetError, match="test.tsv line 2: score 'lots'"):
        load_dataset(broken)


def test_metrics_match_hand_computed_values() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"x": 1, "y": 1}}
    run = {"q1": {"b": 2.0, "a": 1.0}}  # q2 found nothing: it counts as zero
    scores = ir_metrics(qrels, run)
    assert scores["ndcg@10"] == pytest.approx((1 / 1.5849625) / 2, abs=1e-4)
    assert scores["mrr@10"] == pytest.approx(0.25)
    assert scores["recall@10"] == pytest.approx(0.5)
    assert scores["p@5"] == pytest.approx(0.1)
    assert ir_metrics(qrels, {})["ndcg@10"] == 0.0
    assert percentile([10, 20, 30, 40], 50) == 25
    assert percentile([5], 95) == 5 and percentile([], 50) == 0.0


def test_method_names_are_checked() -> None:
    assert [s.name for s in method_specs(["lexical", "rrf"], 0.7)] == ["lexical", "rrf"]
    assert method_specs(["hybrid"], 0.7)[0].weights == (0.7, 0.3)
    with pytest.raises(ValueError, match="unknown method 'bm25'"):
        method_specs(["bm25"], None)


def _mem() -> object:
    import cli.eval  # noqa: F401 - attaches the command
    from cli.app import mem

    return mem


def test_mem_eval_end_to_end_with_cache_and_sweep(database: str, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    args = ["eval", "--dataset", str(BEIR), "--methods", "lexical,semantic,hybrid,rrf,auto", "--sweep",
            "--json", str(out), "--quiet"]
    result = CliRunner().invoke(_mem(), args)
    assert result.exit_code == 0, result.output + (result.stderr or "")
    assert "ingesting" in result.stderr
    report = json.loads(out.read_text())
    assert report["dataset"] == "beir-mini" and report["split"] == "test" and report["queries"] == 4
    for name in ("lexical", "semantic", "hybrid", "rrf", "auto"):
        metrics = report["methods"][name]
        assert set(metrics) >= {"ndcg@10", "mrr@10", "recall@10", "recall@50", "p@5", "p50_ms", "p95_ms"}
        assert 0.0 <= metrics["ndcg@10"] <= 1.0
    # Four easy queries over seven documents: every method should find the answers near the top.
    assert report["methods"]["hybrid"]["ndcg@10"] >= 0.8
    assert report["methods"]["semantic"]["recall@10"] == 1.0
    assert sorted(report["sweep"]) == [f"{w / 10:.1f}" for w in range(11)]
    assert report["sweep"]["0.0"]["ndcg@10"] == pytest.approx(report["methods"]["lexical"]["ndcg@10"], abs=1e-4)
    assert "hybrid" in result.output and "ndcg@10" in result.output
    again = CliRunner().invoke(_mem(), ["eval", "--dataset", str(BEIR), "--methods", "lexical", "--quiet"])
    assert again.exit_code == 0, again.stderr
    assert "already ingested" in again.stderr


def test_mem_eval_on_a_markdown_folder(database: str) -> None:
    result = CliRunner().invoke(_mem(), ["eval", "--dataset", str(VAULT), "--methods", "lexical,hybrid",
                                         "--json", "-", "--quiet"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.output[result.output.index("{"):])
    assert report["split"] == "all" and report["queries"] == 3
    assert report["methods"]["hybrid"]["recall@10"] == 1.0


def test_mem_eval_rejects_bad_arguments(database: str, tmp_path: Path) -> None:
    bad = CliRunner().invoke(_mem(), ["eval", "--dataset", str(tmp_path), "--quiet"])
    assert bad.exit_code == 2 and "neither a BEIR folder" in bad.output + bad.stderr
    bad = CliRunner().invoke(_mem(), ["eval", "--dataset", str(BEIR), "--methods", "bm25", "--quiet"])
    assert bad.exit_code == 2 and "unknown method" in bad.output + bad.stderr
