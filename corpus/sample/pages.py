"""Page templates with known main content, wrapped in the boilerplate real pages carry.

Each template returns a `Page`: the full HTML and its gold main content as a list of blocks
(HTML fragment + plain text), in reading order. Markup and class names are drawn per page so
that no single rule (a tag, a class, a position) finds the main content.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from html import escape

from corpus.sample.text import Prose, chinese_paragraph, chinese_sentence


@dataclass
class Block:
    html: str
    text: str


@dataclass
class Page:
    url: str
    template: str
    lang: str
    title: str
    main: list[Block] = field(default_factory=list)
    html: str = ""

    @property
    def gold_html(self) -> str:
        return "\n".join(b.html for b in self.main)

    @property
    def gold_text(self) -> str:
        return "\n\n".join(b.text for b in self.main)

    @property
    def marked_html(self) -> str:
        """The page with `cc-select="true"` on each main block's root, as WebMainBench annotates:
        the generator's own block labels, for training labelers."""
        html = self.html
        for block in self.main:
            tag_end = block.html.index(">") if " " not in block.html.split(">", 1)[0] else block.html.index(" ")
            marked = block.html[:tag_end] + ' cc-select="true"' + block.html[tag_end:]
            html = html.replace(block.html, marked, 1)
        return html


def _cls(rng: random.Random, *choices: str) -> str:
    """A class attribute drawn from synonyms, sometimes with a hashed suffix like CSS modules."""
    name = rng.choice(choices)
    if rng.random() < 0.3:
        name += f"-{rng.randrange(16**4):04x}"
    return name


def heading(level: int, text: str) -> Block:
    return Block(f"<h{level}>{escape(text)}</h{level}>", text)


def para(text: str) -> Block:
    return Block(f"<p>{escape(text)}</p>", text)


def bullet_list(items: list[str], ordered: bool = False) -> Block:
    tag = "ol" if ordered else "ul"
    lis = "".join(f"<li>{escape(i)}</li>" for i in items)
    return Block(f"<{tag}>{lis}</{tag}>", "\n".join(items))


def table(header: list[str], rows: list[list[str]]) -> Block:
    th = "".join(f"<th>{escape(h)}</th>" for h in header)
    trs = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    text = "\n".join(" | ".join(r) for r in [header, *rows])
    return Block(f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>", text)


def code_block(code: str) -> Block:
    return Block(f"<pre><code>{escape(code)}</code></pre>", code)


# ---------------------------------------------------------------- boilerplate


class Chrome:
    """The page furniture around the main content: all of it is 'other'."""

    def __init__(self, rng: random.Random, prose: Prose, site: str, zh: bool = False):
        self.rng, self.prose, self.site, self.zh = rng, prose, site, zh

    def _links(self, n: int) -> list[str]:
        if self.zh:
            return [chinese_sentence(self.rng)[:6] for _ in range(n)]
        return [self.prose.short_title() for _ in range(n)]

    def nav(self) -> str:
        r = self.rng
        items = (["首页", "新闻", "财经", "科技", "体育", "关于我们"] if self.zh
                 else ["Home", "News", "Topics", "About", "Contact", r.choice(["Shop", "Events", "Blog", "Help"])])
        links = "".join(f'<li><a href="/{i}">{escape(label)}</a></li>' for i, label in enumerate(items))
        if r.random() < 0.5:
            return f'<nav class="{_cls(r, "main-nav", "navbar", "menu", "topnav")}"><ul>{links}</ul></nav>'
        return f'<div id="{_cls(r, "menu", "navigation", "hdr-links")}"><ul>{links}</ul></div>'

    def header(self) -> str:
        r = self.rng
        tag = r.choice(["header", "div"])
        logo = f'<a class="logo" href="/">{escape(self.site)}</a>'
        search = '<form action="/search"><input type="text" name="q" placeholder="Search"><button>Go</button></form>'
        return f'<{tag} class="{_cls(r, "site-header", "masthead", "top", "hdr")}">{logo}{self.nav()}{search}</{tag}>'

    def cookie_banner(self) -> str:
        r = self.rng
        text = ("本网站使用cookie以改善您的体验。" if self.zh else
                "We use cookies to improve your experience. By continuing you accept our cookie policy.")
        return (f'<div class="{_cls(r, "cookie-banner", "gdpr", "consent", "cc-window")}"><p>{text}</p>'
                '<button>Accept</button><button>Settings</button></div>')

    def ad(self) -> str:
        r = self.rng
        label = r.choice(["Advertisement", "Sponsored", "Ad", "Promoted"])
        return (f'<div class="{_cls(r, "ad", "ad-slot", "sponsor", "promo-box", "dfp")}">'
                f'<span>{label}</span><a href="https://ads.example/{r.randrange(10**6)}">'
                f'{escape(self.prose.short_title())} - save {r.randint(10, 70)}% today</a></div>')

    def share(self) -> str:
        r = self.rng
        nets = r.sample(["Facebook", "Twitter", "LinkedIn", "Reddit", "Email", "WhatsApp"], 4)
        btns = "".join(f'<a href="#share-{n.lower()}">Share on {n}</a>' for n in nets)
        return f'<div class="{_cls(r, "share", "social", "share-bar", "sharing")}">{btns}</div>'

    def related(self) -> str:
        r = self.rng
        title = "相关文章" if self.zh else r.choice(["Related articles", "You may also like", "Read next", "Trending"])
        items = "".join(f'<li><a href="/a/{r.randrange(10**5)}">{escape(t)}</a></li>' for t in self._links(r.randint(3, 6)))
        return f'<div class="{_cls(r, "related", "recommended", "more-stories", "trending")}"><h3>{title}</h3><ul>{items}</ul></div>'

    def sidebar(self) -> str:
        r = self.rng
        tag = r.choice(["aside", "div"])
        widgets = [self.related(), self.ad()]
        if r.random() < 0.5:
            widgets.append('<div class="newsletter"><p>Subscribe to our newsletter</p><input type="email"><button>Sign up</button></div>')
        r.shuffle(widgets)
        return f'<{tag} class="{_cls(r, "sidebar", "widget-area", "col-right", "rail")}">{"".join(widgets)}</{tag}>'

    def footer(self) -> str:
        r = self.rng
        tag = r.choice(["footer", "div"])
        links = "".join(f'<a href="/{x.lower()}">{x}</a> ' for x in ["Privacy", "Terms", "Imprint", "Careers", "Sitemap"])
        return (f'<{tag} class="{_cls(r, "site-footer", "footer", "bottom", "ftr")}"><p>{links}</p>'
                f'<p>&copy; {r.randint(2005, 2024)} {escape(self.site)}. All rights reserved.</p></{tag}>')

    def byline(self) -> str:
        r = self.rng
        return (f'<div class="{_cls(r, "byline", "meta", "post-info", "author-box")}">By {escape(self.prose.name())} '
                f'| {r.randint(1, 28)} {r.choice(["Jan", "Mar", "Jun", "Sep", "Nov"])} {r.randint(2010, 2024)} '
                f'| {r.randint(2, 15)} min read</div>')

    def breadcrumbs(self) -> str:
        return f'<div class="breadcrumb"><a href="/">Home</a> &gt; <a href="/{self.prose.topic}">{self.prose.topic.title()}</a></div>'

    def comments(self, n: int) -> str:
        r = self.rng
        items = "".join(
            f'<div class="{_cls(r, "comment", "reply", "c-item")}"><span class="author">{escape(self.prose.name())}</span>'
            f'<span class="date">{r.randint(1, 12)} hours ago</span><p>{escape(self.prose.sentence())}</p>'
            f'<a href="#reply">Reply</a> <span>{r.randint(0, 40)} likes</span></div>'
            for _ in range(n)
        )
        return f'<section class="{_cls(r, "comments", "discussion", "responses")}"><h3>{n} Comments</h3>{items}</section>'


def assemble(rng: random.Random, chrome: Chrome, page: Page, main_html: str, extras_in_main: str = "") -> str:
    """The full document: chrome around a main container whose tag and position vary."""
    r = rng
    container_tag, container_attr = r.choice([
        ("article", ""), ("div", f' class="{_cls(r, "post-body", "entry-content", "story")}"'),
        ("div", f' id="{_cls(r, "content", "main", "primary")}"'), ("section", f' class="{_cls(r, "entry", "text")}"'),
        ("div", ""),
    ])
    main = f"<{container_tag}{container_attr}>{main_html}</{container_tag}>{extras_in_main}"
    sidebar = chrome.sidebar()
    columns = [f'<div class="{_cls(r, "col-main", "content-area", "left")}">{main}</div>', sidebar]
    if r.random() < 0.3:
        columns.reverse()
    parts = [chrome.header()]
    if r.random() < 0.6:
        parts.insert(0, chrome.cookie_banner())
    if r.random() < 0.5:
        parts.append(chrome.breadcrumbs())
    parts.append(f'<div class="{_cls(r, "wrapper", "container", "layout")}">{"".join(columns)}</div>')
    parts.append(chrome.footer())
    lang = "zh-CN" if page.lang == "zh" else "en"
    head = (f'<head><meta charset="utf-8"><title>{escape(page.title)} - {escape(chrome.site)}</title>'
            f'<link rel="stylesheet" href="/static/site.css"><script>var _q=[];</script></head>')
    return f'<!DOCTYPE html><html lang="{lang}">{head}<body>{"".join(parts)}</body></html>'


def _interleave(rng: random.Random, blocks: list[Block], noise: list[str]) -> str:
    """Main blocks in order, with noise (inline ads, share bars) dropped between some of them."""
    out = []
    for i, b in enumerate(blocks):
        out.append(b.html)
        if noise and 0 < i < len(blocks) - 1 and rng.random() < 0.25:
            out.append(noise.pop())
    return "".join(out)


# ---------------------------------------------------------------- templates


def news_article(rng: random.Random, url: str, site: str) -> Page:
    prose = Prose(rng)
    chrome = Chrome(rng, prose, site)
    page = Page(url, "news", "en", prose.title())
    blocks = [heading(1, page.title)]
    for _ in range(rng.randint(2, 4)):
        blocks += [para(prose.paragraph()) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.6:
            blocks.append(heading(2, prose.short_title()))
    blocks.append(para(prose.paragraph()))
    if rng.random() < 0.4:
        q = prose.sentence()
        blocks.insert(2, Block(f"<blockquote>{escape(q)}</blockquote>", q))
    page.main = blocks
    body = _interleave(rng, blocks, [chrome.ad(), chrome.share()])
    page.html = assemble(rng, chrome, page, chrome.byline() + body, chrome.share() + chrome.related())
    return page


def blog_with_comments(rng: random.Random, url: str, site: str) -> Page:
    prose = Prose(rng)
    chrome = Chrome(rng, prose, site)
    page = Page(url, "blog", "en", prose.title())
    blocks = [heading(1, page.title), para(prose.paragraph())]
    if rng.random() < 0.7:
        blocks.append(bullet_list([prose.sentence() for _ in range(rng.randint(3, 5))], ordered=rng.random() < 0.3))
    blocks += [para(prose.paragraph()) for _ in range(rng.randint(1, 3))]
    page.main = blocks
    body = _interleave(rng, blocks, [chrome.ad()])
    comments = chrome.comments(rng.randint(2, 6))
    page.html = assemble(rng, chrome, page, chrome.byline() + body, chrome.share() + comments)
    return page


def forum_thread(rng: random.Random, url: str, site: str) -> Page:
    """The posts are main content; usernames, dates and post counts are not."""
    prose = Prose(rng)
    chrome = Chrome(rng, prose, site)
    page = Page(url, "forum", "en", prose.title() + "?")
    blocks = [heading(1, page.title)]
    posts = []
    post_cls = _cls(rng, "post", "message", "thread-item", "postbit")
    for i in range(rng.randint(3, 7)):
        text = prose.paragraph((1, 4))
        block = Block(f'<div class="{_cls(rng, "post-text", "msg-body", "content")}"><p>{escape(text)}</p></div>', text)
        blocks.append(block)
        user = (f'<div class="{_cls(rng, "user", "poster", "author")}"><b>{escape(prose.name())}</b>'
                f'<span>Posts: {rng.randint(1, 9000)}</span><span>#{i + 1} &middot; {rng.randint(1, 28)}.0{rng.randint(1, 9)}.2023</span></div>')
        posts.append(f'<div class="{post_cls}">{user}{block.html}<a href="#quote">Quote</a></div>')
    page.main = blocks
    main_html = blocks[0].html + "".join(posts)
    pager = '<div class="pagination"><a href="?p=1">1</a><a href="?p=2">2</a><a href="?p=2">Next &raquo;</a></div>'
    page.html = assemble(rng, chrome, page, main_html, pager)
    return page


CODE_SNIPPETS = [
    "def load(path):\n    with open(path) as f:\n        return [line.strip() for line in f]\n",
    "for (let i = 0; i < items.length; i++) {\n  total += items[i].price;\n}\n",
    "SELECT name, count(*) AS n\nFROM events\nGROUP BY name\nORDER BY n DESC;\n",
    "$ pip install example-tool\n$ example-tool --config settings.yaml run\n",
]


def docs_page(rng: random.Random, url: str, site: str) -> Page:
    prose = Prose(rng, "technology")
    chrome = Chrome(rng, prose, site)
    page = Page(url, "docs", "en", f"{prose.short_title().title()} reference")
    code = rng.choice(CODE_SNIPPETS)
    options = [[f"--{rng.choice(prose.nouns)}", rng.choice(["int", "str", "bool", "path"]), str(rng.randint(0, 64)), prose.sentence()[:40]]
               for _ in range(rng.randint(3, 6))]
    page.main = [
        heading(1, page.title), para(prose.paragraph((2, 4))), heading(2, "Example"), code_block(code),
        para(prose.paragraph((1, 3))), heading(2, "Options"), table(["Option", "Type", "Default", "Description"], options),
    ]
    toc = "".join(f'<li><a href="/docs/{i}">{escape(prose.short_title())}</a></li>' for i in range(rng.randint(5, 10)))
    sidenav = f'<div class="{_cls(rng, "docs-nav", "toc-tree", "sphinxsidebar")}"><ul>{toc}</ul></div>'
    prevnext = '<div class="prev-next"><a href="/docs/prev">&laquo; Previous</a> <a href="/docs/next">Next &raquo;</a></div>'
    edit = '<a class="edit-link" href="/edit">Edit this page on GitHub</a>'
    page.html = assemble(rng, chrome, page, "".join(b.html for b in page.main), edit + prevnext + sidenav)
    return page


def product_page(rng: random.Random, url: str, site: str) -> Page:
    prose = Prose(rng)
    chrome = Chrome(rng, prose, site)
    name = f"{prose.rng.choice(['Pro', 'Lite', 'Max', 'Classic'])} {prose.short_title().title()}"
    page = Page(url, "product", "en", name)
    price = f"${rng.randint(5, 900)}.{rng.randint(0, 99):02d}"
    specs = [[k, f"{rng.randint(1, 500)} {u}"] for k, u in [("Weight", "g"), ("Width", "mm"), ("Height", "mm"), ("Battery", "mAh")][: rng.randint(2, 4)]]
    page.main = [heading(1, name), Block(f'<p class="price">{price}</p>', price), para(prose.paragraph()),
                 para(prose.paragraph((2, 3))), table(["Specification", "Value"], specs)]
    cart = '<div class="buy-box"><button>Add to cart</button><button>Add to wishlist</button><span>Free shipping over $50</span></div>'
    reviews = chrome.comments(rng.randint(1, 4)).replace("Comments", "Customer reviews")
    page.html = assemble(rng, chrome, page, "".join(b.html for b in page.main) + cart, reviews + chrome.related())
    return page


def listing_page(rng: random.Random, url: str, site: str) -> Page:
    """An index page: a heading and one line of intro are all the main content there is."""
    prose = Prose(rng)
    chrome = Chrome(rng, prose, site)
    page = Page(url, "listing", "en", f"{prose.topic.title()} archive")
    intro = prose.sentence()
    page.main = [heading(1, page.title), para(intro)]
    teasers = "".join(
        f'<div class="{_cls(rng, "teaser", "card", "list-item")}"><h3><a href="/a/{rng.randrange(10**6)}">{escape(prose.title())}</a></h3>'
        f'<p>{escape(prose.sentence()[:90])}...</p><a href="#">Read more</a></div>'
        for _ in range(rng.randint(6, 12))
    )
    page.html = assemble(rng, chrome, page, "".join(b.html for b in page.main), teasers)
    return page


FORMULAS = [
    (r"E = mc^2", r"\int_0^1 x^2 \, dx = \frac{1}{3}"),
    (r"a^2 + b^2 = c^2", r"\sum_{k=1}^{n} k = \frac{n(n+1)}{2}"),
    (r"\nabla \cdot \mathbf{E} = \rho / \varepsilon_0", r"e^{i\pi} + 1 = 0"),
    (r"p(x) = \frac{1}{\sqrt{2\pi}} e^{-x^2/2}", r"\lim_{n \to \infty} (1 + 1/n)^n = e"),
]


def formula_page(rng: random.Random, url: str, site: str) -> Page:
    prose = Prose(rng, "science")
    chrome = Chrome(rng, prose, site)
    page = Page(url, "formula", "en", f"Notes on the {rng.choice(prose.nouns)} equation")
    inline, display = rng.choice(FORMULAS)
    text1 = f"{prose.sentence()} The relation ${inline}$ {prose.sentence().lower()}"
    blocks = [heading(1, page.title), para(text1),
              Block(f'<div class="{_cls(rng, "math", "equation", "katex-display")}">\\[ {escape(display)} \\]</div>', f"\\[ {display} \\]"),
              para(prose.paragraph()), para(f"{prose.sentence()} Hence $$ {inline} $$ holds for every {rng.choice(prose.nouns)}.")]
    page.main = blocks
    page.html = assemble(rng, chrome, page, "".join(b.html for b in blocks), chrome.related())
    return page


def chinese_article(rng: random.Random, url: str, site: str) -> Page:
    prose = Prose(rng)
    chrome = Chrome(rng, prose, site, zh=True)
    title = chinese_sentence(rng)[:14]
    page = Page(url, "zh_article", "zh", title)
    blocks = [heading(1, title)] + [para(chinese_paragraph(rng)) for _ in range(rng.randint(3, 6))]
    page.main = blocks
    body = _interleave(rng, blocks, [chrome.ad()])
    page.html = assemble(rng, chrome, page, body, chrome.related())
    return page


TEMPLATES = {
    "news": news_article,
    "blog": blog_with_comments,
    "forum": forum_thread,
    "docs": docs_page,
    "product": product_page,
    "listing": listing_page,
    "formula": formula_page,
    "zh_article": chinese_article,
}
