// Encodes files with Hugging Face's JavaScript tokenizers (npm @huggingface/tokenizers),
// the independent implementation gatedlm's tokenizer.json support is checked against.
//   node tokenizer_js_encode.mjs PACKAGE_DIR TOKENIZER_DIR OUT.json FILE...
// OUT.json: {"ids": [[...] per file], "encode_s": seconds spent in encode (files read first)}
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [pkg, tokDir, out, ...files] = process.argv.slice(2);
const { Tokenizer } = await import(pathToFileURL(join(pkg, "dist", "tokenizers.mjs")).href);
const json = JSON.parse(readFileSync(join(tokDir, "tokenizer.json"), "utf8"));
const config = JSON.parse(readFileSync(join(tokDir, "tokenizer_config.json"), "utf8"));
const tokenizer = new Tokenizer(json, config);
const texts = files.map((f) => readFileSync(f, "utf8"));
const start = process.hrtime.bigint();
const ids = texts.map((t) => tokenizer.encode(t, { add_special_tokens: false }).ids);
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
writeFileSync(out, JSON.stringify({ ids, encode_s: seconds }));
