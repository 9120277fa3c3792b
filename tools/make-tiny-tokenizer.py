"""Writes a small word-level tokenizer directory in the Hugging Face format, for running SGLang's
benchmark client offline (its random-ids dataset only needs some tokenizer).
Usage: python make-tiny-tokenizer.py OUT_DIR   (run with a python that has transformers)"""

import itertools
import string
import sys

from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

out = sys.argv[1]
vocab = {"[UNK]": 0, "<s>": 1, "</s>": 2, "<pad>": 3}
for a, b, c in itertools.product(string.ascii_lowercase, repeat=3):
    vocab[a + b + c] = len(vocab)
    if len(vocab) >= 8000:
        break
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
fast = PreTrainedTokenizerFast(
    tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="[UNK]", pad_token="<pad>"
)
fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
fast.save_pretrained(out)
print(out, len(vocab))
