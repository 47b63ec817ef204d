// Encodes files with Hugging Face's Rust tokenizers library (the one transformers uses),
// built for node by npm's @anush008/tokenizers-linux-x64-gnu: a second implementation,
// Oniguruma regexes included, that gatedlm's tokenizer.json support is checked against.
//   node tokenizer_rs_encode.cjs PACKAGE_DIR TOKENIZER_DIR OUT.json FILE...
// OUT.json: {"ids": [[...] per file]}
const fs = require("node:fs");
const path = require("node:path");

const [pkg, tokDir, out, ...files] = process.argv.slice(2);
const { Tokenizer } = require(path.join(pkg, "tokenizers.linux-x64-gnu.node"));
(async () => {
  const tokenizer = Tokenizer.fromFile(path.join(tokDir, "tokenizer.json"));
  const ids = [];
  for (const file of files) {
    const encoding = await tokenizer.encode(fs.readFileSync(file, "utf8"), null, { addSpecialTokens: false });
    ids.push(Array.from(encoding.getIds()));
  }
  fs.writeFileSync(out, JSON.stringify({ ids }));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
