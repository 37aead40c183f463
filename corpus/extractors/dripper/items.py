"""mineru-html's blocks (the `_item_id` elements of a simplified or mapping page) as data: each
block's element, its own text (without the blocks nested in it), and the block as the block
classifier sees a block (corpus.extractors.block_classifier.blocks.Block), so that the classifier's
features and model label Dripper's own blocks: the draft of the speculative labeler
(corpus.extractors.dripper.labelers.draft).
"""

from __future__ import annotations

import re

from corpus.extractors.block_classifier.blocks import LEAF, WHOLE, Block

ITEM_ID = "_item_id"
_WORD = re.compile(r"[a-z]+")


def block_elements(html: str) -> dict[int, object]:
    """Each block id's element (lxml) in a page of mineru-html's (the mapping HTML or the simplified one)."""
    from lxml import html as lxml_html

    root = lxml_html.fromstring(html)
    blocks = {}
    for el in root.iter():
        if isinstance(el.tag, str) and (item_id := el.get(ITEM_ID)) is not None:
            blocks.setdefault(int(item_id), el)
    return blocks


def own_text(element) -> str:
    """The element's text without the text of blocks nested inside it, whitespace squashed."""
    parts: list[str] = []
    _collect(element, parts, top=True)
    return " ".join("".join(parts).split())


def _collect(node, parts: list[str], top: bool) -> None:
    if not top and node.get(ITEM_ID) is not None:
        return
    parts.append(node.text or "")
    for child in node:
        if isinstance(child.tag, str):
            _collect(child, parts, top=False)
        parts.append(child.tail or "")


def block_texts(html: str) -> dict[int, str]:
    """Text of each block, without the text of blocks nested inside it."""
    return {item_id: own_text(el) for item_id, el in block_elements(html).items()}


def _link_chars(element) -> int:
    """Characters inside links of the block's own text (links in nested blocks are theirs)."""
    total = 0
    for a in element.iter("a"):
        owner = next((x for x in a.iterancestors() if x.get(ITEM_ID) is not None), None)
        if owner is element:
            total += len(" ".join(a.text_content().split()))
    return total


def item_blocks(html: str, item_ids) -> list[Block]:
    """The page's blocks in `item_ids` order, as the block classifier's Blocks: the element's tag
    (a container holding a run of text is `#inline`, as the classifier's own walk calls it), the
    ancestors' tags and class/id words, the characters in its links and its enclosing elements
    (numbered in document order). A block id the page lacks is an empty block."""
    elements = block_elements(html)
    order = {}
    if elements:
        root = next(iter(elements.values())).getroottree().getroot()
        order = {el: n for n, el in enumerate(root.iter())}
    blocks = []
    for item_id in item_ids:
        el = elements.get(int(item_id))
        if el is None:
            blocks.append(Block("", "", "#inline", ("html", "body"), (), 0, (0,)))
            continue
        ancestors = list(reversed(list(el.iterancestors())))
        words = tuple(w for a in [*ancestors, el] for w in _WORD.findall(f"{a.get('class') or ''} {a.get('id') or ''}".lower()))
        tag = el.tag if el.tag in LEAF or el.tag in WHOLE else "#inline"
        text = own_text(el)
        blocks.append(Block(text, text, tag, tuple(a.tag for a in ancestors if isinstance(a.tag, str)), words,
                            _link_chars(el), tuple(order[a] for a in ancestors) or (0,)))
    return blocks
