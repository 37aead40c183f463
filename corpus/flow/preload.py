"""Imported by the forkserver that the local executor's worker processes fork from
(corpus.flow.progress): what the flow's steps would otherwise load in every worker of every stage
(datatrove's bundled URL block lists, spaCy and the default word tokenizer of the Gopher filters
and MinHash, the bundled language-id model), loaded once here and shared by every worker forked
since. Each is process-level cached where the steps look for it (corpus.shims, datatrove's
`load_word_tokenizer`), so a worker finds it loaded; a config that asks for another language or
model loads that one in its workers, as before. Loading it changes no step's output."""

from datatrove.utils.word_tokenizers import load_word_tokenizer

from configs.postprocess import PostprocessConfig
from corpus.language import BUNDLED_LID_MODEL
from corpus.shims import bundled_url_lists, fasttext_model


def preload() -> None:
    bundled_url_lists()
    load_word_tokenizer(PostprocessConfig.model_fields["word_tokenizer_language"].default).word_tokenize("spaCy, loaded")
    if BUNDLED_LID_MODEL.is_file():  # absent before `make setup`: the steps then say what to do
        fasttext_model(str(BUNDLED_LID_MODEL))


preload()
