"""Seeded prose for generated pages: English sentences over topic vocabularies, and Chinese.

The text only has to look like web prose to the extractors and filters downstream (stop words,
varied sentences, no two pages alike); it means nothing.
"""

from __future__ import annotations

import random

TOPICS = {
    "science": "cell protein galaxy telescope experiment molecule climate ocean fossil enzyme planet orbit sample laboratory theory particle".split(),
    "sports": "team season coach goal match league player stadium injury transfer final referee tournament record victory training".split(),
    "technology": "server database browser compiler network kernel device battery sensor algorithm startup interface cloud protocol update chip".split(),
    "cooking": "recipe oven flour garlic sauce butter onion dough spice kitchen pan salad pepper broth dessert harvest".split(),
    "travel": "island museum harbor train village mountain hostel passport coast festival market bridge cathedral valley border ferry".split(),
    "finance": "market investor bank loan budget inflation bond currency pension dividend tax credit savings quarter revenue merger".split(),
    "health": "patient doctor clinic vaccine diet sleep therapy symptom hospital nurse exercise study risk treatment trial muscle".split(),
    "history": "empire treaty archive castle dynasty revolution manuscript colony monument battle council century ruler trade parliament siege".split(),
}
ADJECTIVES = "new small large early recent local public private final major simple careful quiet rapid strong modern ancient useful rare common bright heavy remote".split()
VERBS = "describes changes improves supports reveals explains follows measures builds reduces connects protects records studies replaces shapes tests opens offers limits".split()
ADVERBS = "quickly carefully slowly often rarely clearly quietly finally recently widely".split()
PEOPLE = "researchers officials residents engineers visitors students analysts editors farmers volunteers".split()
OPENERS = [
    "According to {people},", "In the last {num} years,", "For most {people},", "Since {year},",
    "Unlike the {adj} {noun},", "After the {noun} in {year},", "As {people} noted,", "",
]
NAMES = "Alice Bruno Chen Dana Emil Farah Goran Hana Ivan Julia Kofi Lena Mateo Nia Omar Priya".split()

ZH_WORDS = (
    "我们 研究 发展 城市 经济 文化 历史 科学 技术 社会 教育 学生 老师 市场 企业 政府 环境 "
    "问题 方法 结果 数据 分析 系统 服务 网络 信息 生活 健康 医院 工作 时间 地方 人们 国家 "
    "世界 重要 新的 主要 明显 已经 正在 可以 需要 通过 提高 改善 支持 影响 建立 保护 增加 "
    "减少 认为 表示 指出 发现 计划 项目 过程 水平 质量 能力 作用 关系 条件 标准 资源"
).split()


class Prose:
    """A seeded source of sentences and paragraphs on one topic."""

    def __init__(self, rng: random.Random, topic: str | None = None):
        self.rng = rng
        self.topic = topic or rng.choice(sorted(TOPICS))
        self.nouns = TOPICS[self.topic]

    def _fill(self, template: str) -> str:
        r = self.rng
        return template.format(
            people=r.choice(PEOPLE), num=r.randint(2, 40), year=r.randint(1850, 2024),
            adj=r.choice(ADJECTIVES), noun=r.choice(self.nouns),
        )

    def sentence(self) -> str:
        r = self.rng
        opener = self._fill(r.choice(OPENERS))
        body = (
            f"the {r.choice(ADJECTIVES)} {r.choice(self.nouns)} {r.choice(VERBS)} "
            f"the {r.choice(self.nouns)} {r.choice(['of', 'in', 'near', 'for', 'with', 'by'])} "
            f"{r.choice(['a', 'the', 'every', 'one'])} {r.choice(ADJECTIVES)} {r.choice(self.nouns)}"
        )
        if r.random() < 0.5:
            body += f", and {r.choice(PEOPLE)} {r.choice(VERBS)} it {r.choice(ADVERBS)}"
        if r.random() < 0.3:
            body += f" at {r.randint(2, 999)} {r.choice(['sites', 'times', 'percent', 'units'])}"
        text = f"{opener} {body}".strip()
        return text[0].upper() + text[1:] + "."

    def paragraph(self, sentences: tuple[int, int] = (3, 6)) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(*sentences)))

    def title(self) -> str:
        r = self.rng
        words = [r.choice(ADJECTIVES).capitalize(), r.choice(self.nouns).capitalize(),
                 r.choice(VERBS), "the", r.choice(self.nouns).capitalize()]
        return " ".join(words)

    def short_title(self) -> str:
        return f"{self.rng.choice(ADJECTIVES).capitalize()} {self.rng.choice(self.nouns)} {self.rng.choice(['news', 'notes', 'guide', 'update', 'report'])}"

    def name(self) -> str:
        return f"{self.rng.choice(NAMES)} {self.rng.choice(NAMES)}son"


def chinese_sentence(rng: random.Random) -> str:
    words = [rng.choice(ZH_WORDS) for _ in range(rng.randint(8, 16))]
    cut = rng.randint(3, len(words) - 3)
    return "".join(words[:cut]) + "，" + "".join(words[cut:]) + "。"


def chinese_paragraph(rng: random.Random) -> str:
    return "".join(chinese_sentence(rng) for _ in range(rng.randint(3, 6)))
