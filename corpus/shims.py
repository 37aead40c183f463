"""Every reach into a corpus dependency's private API, in one place, with the version that needs it.
Check these first when upgrading datatrove or mineru-html.
"""

from __future__ import annotations

# ---------------------------------------------------------------- datatrove 0.10.1


def default_jsonl_record(writer, document) -> dict:
    """JsonlWriter's own record of a document. datatrove 0.10.1 has no public way to extend the
    default record from an adapter (`_default_adapter`)."""
    return writer._default_adapter(document)


def fasttext_model(path: str):
    """A fastText model from a local file. datatrove 0.10.1's FastTextLID only loads its model from
    the hub, and its `fasttext` module (fasttext-numpy2-wheel) exposes the loader as `_FastText`."""
    from fasttext.FastText import _FastText

    return _FastText(path)


# ---------------------------------------------------------------- mineru-html 1.1.2


def set_backend_engine(backend, engine) -> None:
    """Give mineru-html's vLLM backend an engine it did not build: 1.1.2's `setup_llm()` keeps
    `_llm` when set, and the backend has no public setter."""
    backend._llm = engine


def shut_down_engine(labeler) -> None:
    """Stop the vLLM engine behind a mineru-html backend labeler (its engine-core process, and
    with it the GPU memory): mineru-html 1.1.2 keeps the engine in `backend._llm`, and vLLM 0.32's
    `LLM` has no public close; its engine client's `shutdown()` is what `LLM.__del__` would reach."""
    engine = getattr(labeler.backend, "_llm", None)
    if engine is not None and hasattr(engine, "llm_engine"):
        engine.llm_engine.engine_core.shutdown()


# ---------------------------------------------------------------- fsspec (datatrove's file layer)


def gzip_without_timestamps() -> None:
    """Byte-identical `.gz` outputs: Python's GzipFile stamps the write time into every header,
    and fsspec (through which datatrove's writers open files) offers no way to pass `mtime`.
    Registered again for "gzip" with `mtime=0`; reading is unchanged."""
    from gzip import GzipFile

    from fsspec.compression import register_compression

    def gzip_file(f, mode="rb", **kwargs):
        return GzipFile(fileobj=f, mode=mode, mtime=0, **kwargs)

    register_compression("gzip", gzip_file, "gz", force=True)
