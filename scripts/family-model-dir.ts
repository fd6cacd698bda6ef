// `npx tsx scripts/family-model-dir.ts FAMILY DIR`: writes a model directory of a chat family from the tokenizers rlgate's
// npm dependencies ship (the harness matrix's, matrix-families.ts), for `rlgate serve|run|show --model-dir DIR` without
// downloading a model: qwen3-coder, llama3, gpt-oss or deepseek-v3.1.
import { cpSync, rmSync } from "node:fs";
import { resolve } from "node:path";
import { familySetup, MATRIX_FAMILIES, type MatrixFamily } from "./matrix-families.ts";

const [family, target] = process.argv.slice(2);
const families: readonly MatrixFamily[] = MATRIX_FAMILIES.filter((f) => f !== "qwen3");
if (!family || !target || !families.includes(family as MatrixFamily)) {
  console.error(`usage: npx tsx scripts/family-model-dir.ts ${families.join("|")} DIR`);
  process.exit(2);
}
const dir = familySetup(family as MatrixFamily).modelDir()!;
cpSync(dir, resolve(target), { recursive: true });
rmSync(dir, { recursive: true, force: true });
console.log(resolve(target));
