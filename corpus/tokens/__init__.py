"""Tokens: the one tokenizer every arm shares (`tokenizer`), each arm tokenised to Megatron
`.bin/.idx`, and every arm cut to the same token budget (`budget`); `stages` builds the three."""
